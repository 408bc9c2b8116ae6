//! Row encoding. redb's `Value::from_bytes` cannot fail, so rows are stored as JSON bytes and
//! decoded here, where a corrupt row becomes a `StoreError` instead of a panic mid-request.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Corrupt(format!("encode: {e}")))
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("decode: {e}")))
}
