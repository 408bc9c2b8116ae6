//! RS256 signing keys: generated on first start and kept in the store; `pictor keys rotate` adds a
//! new one. Retired keys stay in the JWKS until every token they signed has expired.

use std::sync::{Arc, Mutex};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngExt;
use serde_json::{Value, json};

use super::crypto::b64url;
use crate::clock::Millis;
use crate::store::oauth::SigningKeyRecord;
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key generation failed")]
    Generate,
    #[error("the stored signing key is unusable: {0}")]
    Corrupt(String),
    #[error("no signing key")]
    Missing,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A new 2048-bit RSA key as a store record.
pub fn generate(now: Millis) -> Result<SigningKeyRecord, KeyError> {
    let pair = KeyPair::generate(KeySize::Rsa2048).map_err(|_| KeyError::Generate)?;
    let pkcs8 = pair.as_der().map_err(|_| KeyError::Generate)?;
    let public = pair.public_key();
    let kid = format!(
        "k{}-{}",
        now / 1000,
        hex::encode(rand::rng().random::<[u8; 4]>())
    );
    Ok(SigningKeyRecord {
        kid,
        pkcs8: STANDARD.encode(pkcs8.as_ref()),
        n: b64url(public.modulus().big_endian_without_leading_zero()),
        e: b64url(public.exponent().big_endian_without_leading_zero()),
        created_at: now,
        retired_at: None,
    })
}

/// Creates the first key if the store has none. Runs at start.
pub fn ensure_key(store: &Store, now: Millis) -> Result<(), KeyError> {
    if store.signing_keys()?.iter().all(|k| k.retired_at.is_some()) {
        store.add_signing_key(generate(now)?, now)?;
    }
    Ok(())
}

/// Signs id_tokens with the store's current key; re-reads the key when it was rotated.
/// The parsed current key and its kid.
type CachedKey = Option<(String, Arc<KeyPair>)>;

#[derive(Clone, Default)]
pub struct Signer {
    cached: Arc<Mutex<CachedKey>>,
}

impl Signer {
    fn current(&self, store: &Store) -> Result<(String, Arc<KeyPair>), KeyError> {
        let keys = store.signing_keys()?;
        let rec = keys
            .iter()
            .find(|k| k.retired_at.is_none())
            .ok_or(KeyError::Missing)?;
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((kid, pair)) = cached.as_ref()
            && *kid == rec.kid
        {
            return Ok((kid.clone(), pair.clone()));
        }
        let der = STANDARD
            .decode(&rec.pkcs8)
            .map_err(|e| KeyError::Corrupt(e.to_string()))?;
        let pair =
            Arc::new(KeyPair::from_pkcs8(&der).map_err(|e| KeyError::Corrupt(e.to_string()))?);
        *cached = Some((rec.kid.clone(), pair.clone()));
        Ok((rec.kid.clone(), pair))
    }

    /// A compact JWS (RS256) of `claims`, with the key's `kid` in the header.
    pub fn sign(&self, store: &Store, claims: &Value) -> Result<String, KeyError> {
        let (kid, pair) = self.current(store)?;
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": kid});
        let signing_input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let mut sig = vec![0u8; pair.public_modulus_len()];
        pair.sign(
            &RSA_PKCS1_SHA256,
            &aws_lc_rs::rand::SystemRandom::new(),
            signing_input.as_bytes(),
            &mut sig,
        )
        .map_err(|_| KeyError::Corrupt("signing failed".into()))?;
        Ok(format!("{signing_input}.{}", b64url(&sig)))
    }
}

/// The JWKS document: public parts of the current and still-needed retired keys.
pub fn jwks(store: &Store) -> Result<Value, KeyError> {
    let keys: Vec<Value> = store
        .signing_keys()?
        .into_iter()
        .map(|k| json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": k.kid, "n": k.n, "e": k.e}))
        .collect();
    Ok(json!({ "keys": keys }))
}
