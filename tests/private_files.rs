//! Secrets at rest: the data folder is 0700 and its secret files 0600 from the first CLI command
//! on, backups are written 0600 whatever the umask, and the token signing keys are sealed with
//! `secret.key` (kept outside the store file), so the store file or a copy of it alone cannot
//! sign tokens. Keys stored in plain text by older versions are sealed at start.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::unix::fs::PermissionsExt;

use base64::Engine;
use common::*;
use pictor::idp::crypto::SecretBox;
use pictor::store::Store;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_cli_makes_a_private_data_folder_and_private_backups() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    // The first command ever, before any `serve`.
    let (code, _, err) = run_cli(
        &data,
        &[
            "user",
            "add",
            "--email",
            "mo@example.com",
            "--password-stdin",
        ],
        Some("mo's password!!!\n"),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode(&data), 0o700, "data folder");
    assert_eq!(mode(&data.join("pictor.redb")), 0o600, "store file");
    assert_eq!(mode(&data.join("secret.key")), 0o600, "secret key");
    // A backup is owner-only even with a permissive umask (this test process's is 022 or wider).
    let archive = dir.path().join("backup.tar");
    let (code, _, err) = run_cli(&data, &["backup", "--to", archive.to_str().unwrap()], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode(&archive), 0o600, "backup archive");
    // It holds what restore needs: the store and the key that unseals the signing keys.
    let names: Vec<String> = tar::Archive::new(std::fs::File::open(&archive).unwrap())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(names.contains(&"pictor.redb".to_string()), "{names:?}");
    assert!(names.contains(&"secret.key".to_string()), "{names:?}");
    // No temporary snapshot or partial file left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.contains("snapshot") || n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let restored = dir.path().join("restored");
    let (code, _, err) = run_cli(
        &restored,
        &["restore", "--from", archive.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(mode(&restored), 0o700);
    assert_eq!(mode(&restored.join("secret.key")), 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_keys_are_sealed_and_old_plain_keys_get_sealed() {
    let s = TestServer::start().await;
    let data = s.data_dir();
    let keys = s.store().signing_keys().unwrap();
    assert_eq!(keys.len(), 1);
    assert!(keys[0].pkcs8.starts_with("sealed:"), "sealed in the store");
    // Unsealed with the data folder's key it is a real RSA key; the store holds neither its
    // DER nor the base64 of it.
    let secrets = SecretBox::open_or_create(&data).unwrap();
    let der = secrets
        .open(keys[0].pkcs8.strip_prefix("sealed:").unwrap())
        .unwrap();
    assert!(aws_lc_rs_parses(&der));
    let plain_b64 = base64::engine::general_purpose::STANDARD.encode(&der);
    let _kept = s.stop_keeping_data().await;
    let raw = std::fs::read(data.join("pictor.redb")).unwrap();
    for needle in [&der[..64], &plain_b64.as_bytes()[..64]] {
        assert!(
            !raw.windows(needle.len()).any(|w| w == needle),
            "private key material in the store file"
        );
    }

    // A store written by an older version, with the key in plain base64.
    {
        let store = Store::open(&data.join("pictor.redb")).unwrap();
        let mut rec = store.signing_keys().unwrap().remove(0);
        rec.pkcs8 = plain_b64.clone();
        store.put_signing_key(rec).unwrap();
    }
    let child = spawn_server(&data, &[]);
    let jwks: serde_json::Value = reqwest::get(format!("{}/oauth/jwks", child.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Still published (tokens it signed stay verifiable), but no longer the signing key.
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["kid"].as_str())
        .collect();
    assert!(kids.contains(&keys[0].kid.as_str()), "{kids:?}");
    assert_eq!(kids.len(), 2, "rotated: {kids:?}");
    child.terminate();
    let store = Store::open(&data.join("pictor.redb")).unwrap();
    let recs = store.signing_keys().unwrap();
    assert!(
        recs.iter().all(|r| r.pkcs8.starts_with("sealed:")),
        "sealed at start"
    );
    let old = recs.iter().find(|r| r.kid == keys[0].kid).unwrap();
    assert!(old.retired_at.is_some(), "the once-plain key is retired");
    drop(store);

    // The store file without its secret.key cannot sign: the server refuses to start and says
    // why, instead of silently making tokens nobody can check.
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(data.join("pictor.redb"), copy.path().join("pictor.redb")).unwrap();
    let mut child = pictor_cmd(copy.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the server started with a store whose keys it cannot unseal");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(err.contains("secret.key"), "{err}");
}

fn aws_lc_rs_parses(der: &[u8]) -> bool {
    // PKCS#8 v1 starts with a SEQUENCE and carries the rsaEncryption OID.
    let rsa_oid = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    der.first() == Some(&0x30) && der.windows(rsa_oid.len()).any(|w| w == rsa_oid)
}
