//! Moving in from another identity provider: a Keycloak realm export (JSON, pbkdf2-sha256 and
//! pbkdf2-sha512 credentials) or a CSV `email,name,hash` with Django-style
//! `pbkdf2_sha256$iterations$salt$hash`. Imported hashes are kept in a PHC-like form
//! (`$pbkdf2-sha256$i=N$<salt b64>$<hash b64>`), verified with pbkdf2 at the next sign-in and then
//! replaced by an Argon2id hash.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::password;

/// One account to import. No `Debug`: it carries a password hash.
#[derive(Clone, Serialize, Deserialize)]
pub struct ImportRecord {
    pub email: String,
    pub name: Option<String>,
    /// The hash in Pictor's stored form.
    pub password_hash: Option<String>,
}

/// A line or user that could not be imported.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refused {
    /// `line N` (CSV) or `user <username>` (Keycloak).
    pub at: String,
    pub reason: String,
}

#[derive(Default)]
pub struct Parsed {
    pub records: Vec<ImportRecord>,
    pub refused: Vec<Refused>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Digest {
    Sha256,
    Sha512,
}

fn phc(digest: Digest, iterations: u32, salt: &[u8], hash: &[u8]) -> String {
    let name = match digest {
        Digest::Sha256 => "pbkdf2-sha256",
        Digest::Sha512 => "pbkdf2-sha512",
    };
    format!(
        "${name}$i={iterations}${}${}",
        STANDARD_NO_PAD.encode(salt),
        STANDARD_NO_PAD.encode(hash)
    )
}

fn decode_b64(s: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(s.trim())
        .or_else(|_| STANDARD_NO_PAD.decode(s.trim().trim_end_matches('=')))
        .ok()
}

/// Reads a file's text as a Keycloak realm export (JSON) or a CSV.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        parse_keycloak(trimmed)
    } else {
        Ok(parse_csv(trimmed))
    }
}

fn parse_keycloak(text: &str) -> Result<Parsed, String> {
    let doc: Value =
        serde_json::from_str(text).map_err(|e| format!("not a Keycloak realm export: {e}"))?;
    let users = doc
        .get("users")
        .and_then(Value::as_array)
        .ok_or("the realm export has no \"users\" list (export with users included)")?;
    let mut out = Parsed::default();
    for (i, u) in users.iter().enumerate() {
        let who = u
            .get("username")
            .and_then(Value::as_str)
            .map(|s| format!("user {s}"))
            .unwrap_or_else(|| format!("user #{}", i + 1));
        let Some(email) = u
            .get("email")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        else {
            out.refused.push(Refused {
                at: who,
                reason: "no e-mail address".into(),
            });
            continue;
        };
        let name = [u.get("firstName"), u.get("lastName")]
            .iter()
            .filter_map(|v| v.and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" ")
            .trim()
            .to_string();
        let cred = u
            .get("credentials")
            .and_then(Value::as_array)
            .and_then(|c| {
                c.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some("password"))
            });
        let hash = match cred {
            None => None,
            Some(c) => match keycloak_hash(c) {
                Ok(h) => Some(h),
                Err(reason) => {
                    out.refused.push(Refused { at: who, reason });
                    continue;
                }
            },
        };
        out.records.push(ImportRecord {
            email: email.to_string(),
            name: Some(name).filter(|n| !n.is_empty()),
            password_hash: hash,
        });
    }
    Ok(out)
}

fn keycloak_hash(cred: &Value) -> Result<String, String> {
    // Keycloak ≥ 12 keeps the parameters in two JSON strings; older exports have flat fields.
    let parse_inner = |k: &str| {
        cred.get(k)
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
    };
    let secret = parse_inner("secretData").unwrap_or_else(|| cred.clone());
    let data = parse_inner("credentialData").unwrap_or_else(|| cred.clone());
    let algorithm = data.get("algorithm").and_then(Value::as_str).unwrap_or("");
    let digest = match algorithm {
        "pbkdf2-sha256" => Digest::Sha256,
        "pbkdf2-sha512" => Digest::Sha512,
        other => {
            return Err(format!(
                "unsupported hash algorithm {other:?} (pbkdf2-sha256 and pbkdf2-sha512 are supported)"
            ));
        }
    };
    let iterations = data
        .get("hashIterations")
        .and_then(Value::as_u64)
        .filter(|n| (1..=10_000_000).contains(n))
        .ok_or("missing or bad hashIterations")? as u32;
    let value = secret
        .get("value")
        .or_else(|| secret.get("hashedSaltedValue"))
        .and_then(Value::as_str)
        .and_then(decode_b64)
        .ok_or("missing or bad hash value")?;
    let salt = secret
        .get("salt")
        .and_then(Value::as_str)
        .and_then(decode_b64)
        .ok_or("missing or bad salt")?;
    if value.len() < 16 || value.len() > 128 {
        return Err("unexpected hash length".into());
    }
    Ok(phc(digest, iterations, &salt, &value))
}

fn parse_csv(text: &str) -> Parsed {
    let mut out = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if n == 1
            && fields
                .first()
                .is_some_and(|f| f.eq_ignore_ascii_case("email"))
        {
            continue;
        }
        if fields.len() != 3 {
            out.refused.push(Refused {
                at: format!("line {n}"),
                reason: format!(
                    "expected 3 fields (email,name,hash), found {}",
                    fields.len()
                ),
            });
            continue;
        }
        let hash = if fields[2].is_empty() {
            None
        } else {
            match django_hash(fields[2]) {
                Ok(h) => Some(h),
                Err(reason) => {
                    out.refused.push(Refused {
                        at: format!("line {n}"),
                        reason,
                    });
                    continue;
                }
            }
        };
        out.records.push(ImportRecord {
            email: fields[0].to_string(),
            name: Some(fields[1].to_string()).filter(|s| !s.is_empty()),
            password_hash: hash,
        });
    }
    out
}

fn django_hash(s: &str) -> Result<String, String> {
    let parts: Vec<&str> = s.split('$').collect();
    let (digest, rest) = match parts.first() {
        Some(&"pbkdf2_sha256") => (Digest::Sha256, &parts[1..]),
        Some(&"pbkdf2_sha512") => (Digest::Sha512, &parts[1..]),
        Some(other) => {
            return Err(format!(
                "unknown hash format {:?}",
                other.chars().take(20).collect::<String>()
            ));
        }
        None => return Err("empty hash".into()),
    };
    let [iterations, salt, hash] = rest else {
        return Err("expected pbkdf2_sha256$iterations$salt$hash".into());
    };
    let iterations: u32 = iterations
        .parse()
        .ok()
        .filter(|n| (1..=10_000_000).contains(n))
        .ok_or("bad iteration count")?;
    let hash = decode_b64(hash)
        .filter(|h| (16..=128).contains(&h.len()))
        .ok_or("bad hash value")?;
    // Django's salt is used as text, not decoded.
    Ok(phc(digest, iterations, salt.as_bytes(), &hash))
}

/// Verifies an imported pbkdf2 hash (constant-time comparison). `None` when `stored` is not one.
pub fn verify_pbkdf2(pw: &str, stored: &str) -> Option<bool> {
    let mut parts = stored.strip_prefix('$')?.split('$');
    let digest = match parts.next()? {
        "pbkdf2-sha256" => Digest::Sha256,
        "pbkdf2-sha512" => Digest::Sha512,
        _ => return None,
    };
    let iterations: u32 = parts.next()?.strip_prefix("i=")?.parse().ok()?;
    let salt = STANDARD_NO_PAD.decode(parts.next()?).ok()?;
    let expected = STANDARD_NO_PAD.decode(parts.next()?).ok()?;
    let mut derived = vec![0u8; expected.len()];
    match digest {
        Digest::Sha256 => pbkdf2::pbkdf2_hmac::<pbkdf2::sha2::Sha256>(
            pw.as_bytes(),
            &salt,
            iterations,
            &mut derived,
        ),
        Digest::Sha512 => pbkdf2::pbkdf2_hmac::<pbkdf2::sha2::Sha512>(
            pw.as_bytes(),
            &salt,
            iterations,
            &mut derived,
        ),
    }
    Some(super::apikey::hashes_equal(&derived, &expected))
}

/// Whether a stored hash should be replaced by Argon2id at the next successful sign-in.
pub fn needs_rehash(stored: &str) -> bool {
    !stored.starts_with("$argon2id$")
}

/// Verifies any stored hash Pictor knows (Argon2id, imported pbkdf2).
pub fn verify_any(pw: &str, stored: &str) -> bool {
    verify_pbkdf2(pw, stored).unwrap_or_else(|| password::verify(pw, stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn django(pw: &str, salt: &str, iterations: u32) -> String {
        let mut out = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<pbkdf2::sha2::Sha256>(
            pw.as_bytes(),
            salt.as_bytes(),
            iterations,
            &mut out,
        );
        format!("pbkdf2_sha256${iterations}${salt}${}", STANDARD.encode(out))
    }

    #[test]
    fn django_csv_round_trip() {
        let csv = format!(
            "email,name,hash\nann@example.com,Ann,{}\nbob@example.com,Bob,bcrypt$2b$12$abc\nbad line\n",
            django("s3cret-pass", "NaCl123", 1000)
        );
        let p = parse(&csv).unwrap();
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.refused.len(), 2);
        assert_eq!(p.refused[0].at, "line 3");
        let h = p.records[0].password_hash.clone().unwrap();
        assert!(verify_any("s3cret-pass", &h));
        assert!(!verify_any("wrong", &h));
        assert!(needs_rehash(&h));
    }

    #[test]
    fn keycloak_sha512_credential() {
        let salt = b"0123456789abcdef";
        let mut out = [0u8; 64];
        pbkdf2::pbkdf2_hmac::<pbkdf2::sha2::Sha512>(b"kc-password", salt, 210000 / 100, &mut out);
        let secret = serde_json::json!({"value": STANDARD.encode(out), "salt": STANDARD.encode(salt), "additionalParameters": {}}).to_string();
        let data = serde_json::json!({"hashIterations": 2100, "algorithm": "pbkdf2-sha512", "additionalParameters": {}}).to_string();
        let realm = serde_json::json!({"realm": "r", "users": [
            {"username": "kc", "email": "kc@example.com", "firstName": "Kay", "lastName": "Cee", "credentials": [{"type": "password", "secretData": secret, "credentialData": data}]},
            {"username": "nomail", "credentials": []},
            {"username": "weird", "email": "w@example.com", "credentials": [{"type": "password", "secretData": "{}", "credentialData": "{\"algorithm\":\"argon2\",\"hashIterations\":1}"}]}
        ]});
        let p = parse(&realm.to_string()).unwrap();
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.records[0].name.as_deref(), Some("Kay Cee"));
        assert!(verify_any(
            "kc-password",
            p.records[0].password_hash.as_deref().unwrap()
        ));
        assert_eq!(p.refused.len(), 2);
        assert!(p.refused[1].reason.contains("argon2"));
    }
}
