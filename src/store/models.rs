//! Installed diffusion models: a name (as used by `pictor models …` and the configuration) →
//! where the model is and what inspection found. The files themselves stay where they are (or
//! under `<data>/models/` when pulled from the hub).

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::tables::{MODELS, PULLS, TIERS};
use super::{Store, StoreError, codec};
use crate::clock::Millis;
use crate::models::{Arch, Family, Kind, Layout, Role};

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
    /// A pipeline, or a tiny decoder (records from before this field are pipelines).
    #[serde(default)]
    pub kind: Kind,
    /// A pipeline's family (its preset); absent on records from before it was recorded, where
    /// it is worked out again from the architecture, name and source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    /// What a pipeline's UNet is for (records from before this field: text to image).
    #[serde(default, skip_serializing_if = "Role::is_text")]
    pub role: Role,
}

impl ModelRecord {
    /// The family of a pipeline (`None` for a tiny decoder).
    pub fn family(&self) -> Option<Family> {
        if self.kind != Kind::Pipeline {
            return None;
        }
        Some(self.family.unwrap_or_else(|| {
            let says = |s: &str| s.to_ascii_lowercase().contains("turbo");
            Family::of(
                self.arch,
                says(&self.name) || self.source.as_deref().is_some_and(says),
            )
        }))
    }

    /// How people call it: the catalogue's title for a model pulled from its repository, else
    /// the name it was installed under.
    pub fn title(&self) -> String {
        let repo = self
            .source
            .as_deref()
            .map(|s| s.split('@').next().unwrap_or(s));
        repo.and_then(crate::models::known)
            .filter(|k| k.id == self.name || repo.is_some())
            .map(|k| k.title.to_string())
            .unwrap_or_else(|| self.name.clone())
    }
}

/// The tiers an installed model can draw: the three model ids and edits.
pub const TIER_NAMES: [&str; 4] = ["fast", "artist", "0.2plus", "edit"];

/// What draws one tier: an installed model and the settings that differ from its family's
/// preset (absent: the preset's). Values are the configuration file's (docs/models.md).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TierMapping {
    pub model: String,
    /// The family whose preset it starts from (`sd-turbo`, `sd1`, …); absent: the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guidance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negative_prompt: Option<String>,
    /// An installed tiny decoder's name, or `none`; absent: the preset's choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiny_vae: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strength: Option<f64>,
    /// InstructPix2Pix models: how closely edits keep the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_guidance: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestep_spacing: Option<String>,
    /// The text encoders' weights: `float32` (as the files) or `int8` (8-bit blocks on the CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_weights: Option<String>,
    /// The UNet's transformer layers: `float32` (as the files) or `int8` (8-bit, multiplied in
    /// integers on CPUs with AVX-512 VNNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unet_weights: Option<String>,
    /// FLUX and SD 3: the transformer as one file (ComfyUI's `flux1-*.safetensors`, Stability
    /// AI's `sd3.5_*.safetensors`, or a GGUF) in place of the folder's `transformer/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformer: Option<String>,
    /// FLUX: the T5 encoder as one file (a GGUF such as city96's `t5-v1_1-xxl-encoder-Q8_0.gguf`,
    /// or safetensors) in place of the folder's `text_encoder_2/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_encoder_2: Option<String>,
    /// SD 3: the T5 encoder as one file in place of the folder's `text_encoder_3/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_encoder_3: Option<String>,
    #[serde(default)]
    pub updated_at: Millis,
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

    /// Unregisters a model and returns what it was (its files are the caller's business). A
    /// model a tier is mapped to is refused: unmap the tier first.
    pub fn remove_model(&self, name: &str) -> Result<ModelRecord, StoreError> {
        let txn = self.begin_write()?;
        {
            let t = txn.open_table(TIERS)?;
            for row in t.iter()? {
                let row = row?;
                let m: TierMapping = codec::decode(row.1.value())?;
                if m.model == name || m.tiny_vae.as_deref() == Some(name) {
                    return Err(StoreError::Conflict(format!(
                        "{name:?} draws the {} tier: map the tier to another model or unmap it first (pictor models unmap {})",
                        row.0.value(),
                        row.0.value()
                    )));
                }
            }
        }
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

impl Store {
    /// Sets what draws `tier` (the caller has checked the mapping); returns the one replaced.
    pub fn map_tier(
        &self,
        tier: &str,
        mapping: &TierMapping,
    ) -> Result<Option<TierMapping>, StoreError> {
        let txn = self.begin_write()?;
        let old = {
            let models = txn.open_table(MODELS)?;
            for name in std::iter::once(&mapping.model).chain(mapping.tiny_vae.as_ref()) {
                if name != "none" && models.get(name.as_str())?.is_none() {
                    return Err(StoreError::NotFound(format!(
                        "no installed model is named {name:?} (see `pictor models list`)"
                    )));
                }
            }
            let mut t = txn.open_table(TIERS)?;
            t.insert(tier, codec::encode(mapping)?.as_slice())?
                .map(|v| codec::decode(v.value()))
                .transpose()?
        };
        self.commit(txn)?;
        Ok(old)
    }

    /// Removes `tier`'s mapping (the tier goes back to the painter or its backend).
    pub fn unmap_tier(&self, tier: &str) -> Result<TierMapping, StoreError> {
        let txn = self.begin_write()?;
        let old = {
            let mut t = txn.open_table(TIERS)?;
            let removed = t.remove(tier)?;
            match removed {
                Some(v) => codec::decode(v.value())?,
                None => {
                    return Err(StoreError::NotFound(format!(
                        "the {tier} tier is not mapped to a model"
                    )));
                }
            }
        };
        self.commit(txn)?;
        Ok(old)
    }

    /// Every stored tier mapping.
    pub fn tiers(&self) -> Result<Vec<(String, TierMapping)>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(TIERS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            let row = row?;
            out.push((row.0.value().to_string(), codec::decode(row.1.value())?));
        }
        Ok(out)
    }
}

/// A download the server runs: what to fetch and who asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRecord {
    /// The name it is installed under.
    pub name: String,
    /// `owner/name` on the hub.
    pub repo: String,
    pub revision: String,
    #[serde(default)]
    pub variant: Option<String>,
    pub started_at: Millis,
    /// Who started it, as the audit log names them.
    pub actor: String,
}

impl Store {
    /// Records a download; one per model name.
    pub fn add_pull(&self, record: &PullRecord) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            if txn.open_table(MODELS)?.get(record.name.as_str())?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "a model named {:?} is already installed",
                    record.name
                )));
            }
            let mut t = txn.open_table(PULLS)?;
            if t.get(record.name.as_str())?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "{:?} is already being downloaded",
                    record.name
                )));
            }
            t.insert(record.name.as_str(), codec::encode(record)?.as_slice())?;
        }
        self.commit(txn)?;
        Ok(())
    }

    /// Forgets a download (finished, failed or cancelled).
    pub fn remove_pull(&self, name: &str) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        txn.open_table(PULLS)?.remove(name)?;
        self.commit(txn)?;
        Ok(())
    }

    /// The downloads to resume.
    pub fn pulls(&self) -> Result<Vec<PullRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(PULLS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(codec::decode(row?.1.value())?);
        }
        Ok(out)
    }
}
