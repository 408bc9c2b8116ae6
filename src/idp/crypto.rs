//! Small cryptographic helpers of the identity provider: random tokens, SHA-256, constant-time
//! comparison, PKCE, and the secret box (AES-256-GCM with a key file in the data folder) that
//! encrypts TOTP secrets at rest.

use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngExt;
use sha2::{Digest, Sha256};

pub use crate::auth::secret::{b64url, ct_eq, random_token, sha256, sha256_hex};

/// RFC 7636 S256: `BASE64URL(SHA256(verifier)) == challenge`, with the verifier's syntax checked.
pub fn pkce_s256_matches(verifier: &str, challenge: &str) -> bool {
    let syntax_ok = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    syntax_ok && ct_eq(b64url(&sha256(verifier)).as_bytes(), challenge.as_bytes())
}

/// Encrypts small secrets at rest. The key lives in `<data>/secret.key` (mode 0600), apart from
/// the store file, so a copy of `pictor.redb` alone does not reveal TOTP secrets.
pub struct SecretBox {
    key: LessSafeKey,
    /// HMAC-SHA256 key derived from the same secret (CSRF tokens bound to a session).
    mac: aws_lc_rs::hmac::Key,
}

#[derive(Debug, thiserror::Error)]
#[error("secret key: {0}")]
pub struct SecretBoxError(String);

impl SecretBox {
    pub fn open_or_create(data_dir: &Path) -> Result<SecretBox, SecretBoxError> {
        let path = data_dir.join("secret.key");
        let key_bytes: Vec<u8> = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let fresh: [u8; 32] = rand::rng().random();
                write_private(&path, &fresh).map_err(|e| SecretBoxError(e.to_string()))?;
                fresh.to_vec()
            }
            Err(e) => return Err(SecretBoxError(e.to_string())),
        };
        let unbound = UnboundKey::new(&AES_256_GCM, &key_bytes)
            .map_err(|_| SecretBoxError(format!("{} is not a 32-byte key", path.display())))?;
        // A separate key for MACs, derived so the encryption key is never used for two purposes.
        let derived = Sha256::new()
            .chain_update(b"pictor mac key v1\0")
            .chain_update(&key_bytes)
            .finalize();
        Ok(SecretBox {
            key: LessSafeKey::new(unbound),
            mac: aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &derived),
        })
    }

    /// HMAC-SHA256 of `parts` (joined unambiguously) with the data folder's key.
    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut ctx = aws_lc_rs::hmac::Context::with_key(&self.mac);
        for p in parts {
            ctx.update(&(p.len() as u64).to_be_bytes());
            ctx.update(p);
        }
        let tag = ctx.sign();
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// base64(nonce ‖ ciphertext ‖ tag)
    pub fn seal(&self, plaintext: &[u8]) -> Option<String> {
        let nonce_bytes: [u8; NONCE_LEN] = rand::rng().random();
        let mut buf = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce_bytes),
                Aad::empty(),
                &mut buf,
            )
            .ok()?;
        let mut out = nonce_bytes.to_vec();
        out.extend(buf);
        Some(STANDARD.encode(out))
    }

    pub fn open(&self, sealed: &str) -> Option<Vec<u8>> {
        let raw = STANDARD.decode(sealed).ok()?;
        if raw.len() < NONCE_LEN {
            return None;
        }
        let (nonce, rest) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = rest.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::empty(), &mut buf).ok()?;
        Some(plain.to_vec())
    }
}

/// Creates a file readable by the owner only.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_rfc7636_example() {
        // RFC 7636 appendix B.
        assert!(pkce_s256_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
        assert!(!pkce_s256_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
            "wrong"
        ));
        assert!(!pkce_s256_matches(
            "short",
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        ));
    }

    #[test]
    fn secret_box_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let b = SecretBox::open_or_create(dir.path()).unwrap();
        let sealed = b.seal(b"JBSWY3DPEHPK3PXP").unwrap();
        assert!(!sealed.contains("JBSWY3DP"));
        let again = SecretBox::open_or_create(dir.path()).unwrap();
        assert_eq!(again.open(&sealed).unwrap(), b"JBSWY3DPEHPK3PXP");
        assert!(again.open("garbage").is_none());
    }
}
