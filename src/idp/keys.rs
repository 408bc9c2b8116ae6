//! RS256 signing keys: generated on first start and kept in the store; `pictor keys rotate` adds a
//! new one. Retired keys stay in the JWKS until every token they signed has expired.

use std::sync::{Arc, RwLock};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngExt;
use serde_json::{Value, json};

use super::crypto::{SecretBox, b64url};
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

/// Marks a private key sealed with the data folder's `secret.key` (AES-256-GCM).
const SEALED: &str = "sealed:";

/// Seals PKCS#8 DER for the store: the store file (or a copy of it) alone cannot sign tokens.
fn seal(secrets: &SecretBox, der: &[u8]) -> Result<String, KeyError> {
    secrets
        .seal(der)
        .map(|s| format!("{SEALED}{s}"))
        .ok_or(KeyError::Generate)
}

/// The PKCS#8 DER of a stored key: sealed, or plain base64 as written before keys were sealed.
fn private_der(rec: &SigningKeyRecord, secrets: &SecretBox) -> Result<Vec<u8>, KeyError> {
    match rec.pkcs8.strip_prefix(SEALED) {
        Some(sealed) => secrets.open(sealed).ok_or_else(|| {
            KeyError::Corrupt(format!(
                "signing key {} cannot be unsealed: secret.key is not the one this store was made with (restore the data folder's own secret.key from its backup, or run `pictor keys rotate` to start over with a new key)",
                rec.kid
            ))
        }),
        None => STANDARD
            .decode(&rec.pkcs8)
            .map_err(|e| KeyError::Corrupt(e.to_string())),
    }
}

/// A new 2048-bit RSA key as a store record, its private half sealed.
pub fn generate(now: Millis, secrets: &SecretBox) -> Result<SigningKeyRecord, KeyError> {
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
        pkcs8: seal(secrets, pkcs8.as_ref())?,
        n: b64url(public.modulus().big_endian_without_leading_zero()),
        e: b64url(public.exponent().big_endian_without_leading_zero()),
        created_at: now,
        retired_at: None,
    })
}

/// Creates the first key if the store has none, and seals keys stored in plain text by older
/// versions. Runs at start.
pub fn ensure_key(store: &Store, secrets: &SecretBox, now: Millis) -> Result<(), KeyError> {
    let mut was_plain = false;
    for mut rec in store.signing_keys()? {
        if !rec.pkcs8.starts_with(SEALED) {
            let der = private_der(&rec, secrets)?;
            rec.pkcs8 = seal(secrets, &der)?;
            store.put_signing_key(rec)?;
            was_plain = true;
        } else if rec.retired_at.is_none() {
            // Refuse to start with a key that cannot sign (a store without its secret.key).
            private_der(&rec, secrets)?;
        }
    }
    if was_plain {
        // The plain copy may linger in the file's free pages and in old backups: retire that
        // key (it stays in the JWKS until the tokens it signed expire) and sign with a new one.
        store.add_signing_key(generate(now, secrets)?, now)?;
        tracing::warn!(
            "signing keys stored in plain text were sealed; the current key was rotated"
        );
    } else if store.signing_keys()?.iter().all(|k| k.retired_at.is_some()) {
        store.add_signing_key(generate(now, secrets)?, now)?;
    }
    Ok(())
}

/// What the signing keys give the requests, prepared once per key change: the parsed current
/// key and the JWKS document (bytes and ETag).
pub struct KeySet {
    /// [`Store::key_generation`] it was built at.
    generation: u64,
    kid: String,
    pair: KeyPair,
    pub jwks: bytes::Bytes,
    pub etag: String,
}

/// Signs id_tokens with the store's current key. The key is parsed once and shared: signing
/// takes no lock (one atomic read and an `Arc` clone), and a rotation is seen at the next call.
#[derive(Clone)]
pub struct Signer {
    prepared: Arc<RwLock<Option<Arc<KeySet>>>>,
    secrets: Arc<SecretBox>,
}

impl Signer {
    pub fn new(secrets: Arc<SecretBox>) -> Signer {
        Signer {
            prepared: Arc::default(),
            secrets,
        }
    }

    /// The prepared keys if they are current (no store access).
    pub fn prepared(&self, store: &Store) -> Option<Arc<KeySet>> {
        let generation = store.key_generation();
        self.prepared
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|set| set.generation == generation)
            .cloned()
    }

    /// The prepared keys, rebuilt from the store when they changed since.
    pub fn keys(&self, store: &Store) -> Result<Arc<KeySet>, KeyError> {
        let generation = store.key_generation();
        if let Some(set) = self.prepared(store) {
            return Ok(set);
        }
        let records = store.signing_keys()?;
        let rec = records
            .iter()
            .find(|k| k.retired_at.is_none())
            .ok_or(KeyError::Missing)?;
        let der = private_der(rec, &self.secrets)?;
        let pair = KeyPair::from_pkcs8(&der).map_err(|e| KeyError::Corrupt(e.to_string()))?;
        let jwks = jwks_of(&records).to_string();
        let etag = format!("\"{}\"", hex::encode(&super::crypto::sha256(&jwks)[..12]));
        let set = Arc::new(KeySet {
            generation,
            kid: rec.kid.clone(),
            pair,
            jwks: bytes::Bytes::from(jwks),
            etag,
        });
        *self.prepared.write().unwrap_or_else(|e| e.into_inner()) = Some(set.clone());
        Ok(set)
    }

    /// A compact JWS (RS256) of `claims`, with the key's `kid` in the header.
    pub fn sign(&self, store: &Store, claims: &Value) -> Result<String, KeyError> {
        let set = self.keys(store)?;
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": set.kid});
        let signing_input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let mut sig = vec![0u8; set.pair.public_modulus_len()];
        set.pair
            .sign(
                &RSA_PKCS1_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                signing_input.as_bytes(),
                &mut sig,
            )
            .map_err(|_| KeyError::Corrupt("signing failed".into()))?;
        Ok(format!("{signing_input}.{}", b64url(&sig)))
    }
}

/// The claims of a compact RS256 JWS signed by one of the store's keys (current or retired),
/// or `None` when it is malformed, of another algorithm, or its signature does not check out.
/// Nothing else is checked here (issuer, audience and times are the caller's).
pub fn verify(store: &Store, token: &str) -> Option<Value> {
    use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    if token.len() > 16 * 1024 {
        return None;
    }
    let mut parts = token.split('.');
    let (h, p, sig) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).ok()?).ok()?;
    if header["alg"] != "RS256" {
        return None;
    }
    let kid = header["kid"].as_str()?;
    let keys = store.signing_keys().ok()?;
    let key = keys.iter().find(|k| k.kid == kid)?;
    let (n, e) = (
        URL_SAFE_NO_PAD.decode(&key.n).ok()?,
        URL_SAFE_NO_PAD.decode(&key.e).ok()?,
    );
    let signature = URL_SAFE_NO_PAD.decode(sig).ok()?;
    let signing_input = &token[..h.len() + 1 + p.len()];
    RsaPublicKeyComponents { n: &n, e: &e }
        .verify(
            &RSA_PKCS1_2048_8192_SHA256,
            signing_input.as_bytes(),
            &signature,
        )
        .ok()?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).ok()?).ok()
}

fn jwks_of(records: &[SigningKeyRecord]) -> Value {
    let keys: Vec<Value> = records
        .iter()
        .map(|k| json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": k.kid, "n": k.n, "e": k.e}))
        .collect();
    json!({ "keys": keys })
}
