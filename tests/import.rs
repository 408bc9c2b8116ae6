//! `pictor user import`: Keycloak realm export and Django-style CSV; imported people sign in with
//! their old passwords, which are then rehashed to Argon2id; duplicates skipped, unknown formats
//! refused and named.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::*;
use pictor::store::Store;
use serde_json::json;

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

fn keycloak_realm() -> String {
    let salt = b"kc-salt-16-bytes";
    let mut out = [0u8; 64];
    pbkdf2::pbkdf2_hmac::<pbkdf2::sha2::Sha256>(b"keycloak pass", salt, 27500, &mut out);
    let secret = json!({"value": STANDARD.encode(out), "salt": STANDARD.encode(salt), "additionalParameters": {}}).to_string();
    let data =
        json!({"hashIterations": 27500, "algorithm": "pbkdf2-sha256", "additionalParameters": {}})
            .to_string();
    json!({"realm": "old", "users": [
        {"username": "kay", "email": "kay@example.com", "firstName": "Kay", "credentials": [{"type": "password", "secretData": secret, "credentialData": data}]},
        {"username": "otp-only", "email": "o@example.com", "credentials": [{"type": "password", "secretData": "{}", "credentialData": "{\"algorithm\":\"bcrypt\",\"hashIterations\":10}"}]}
    ]})
    .to_string()
}

async fn sign_in(base: &str, email: &str, password: &str) -> u16 {
    let mut b = Browser::new();
    let page = b.get(&format!("{base}/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", email);
    set_field(&mut fields, "password", password);
    b.post(&format!("{base}/login"), &fields).await.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_then_sign_in_with_old_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    cli_json(
        d,
        &["user", "add", "--email", "dup@example.com", "--json"],
        None,
    );
    let csv = d.join("users.csv");
    std::fs::write(
        &csv,
        format!(
            "email,name,hash\nann@example.com,Ann,{}\ndup@example.com,Dup,{}\nbob@example.com,Bob,bcrypt$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW\nnot,enough\n",
            django("ann's old password", "salt123", 10000),
            django("x", "y", 1000)
        ),
    )
    .unwrap();
    let report = cli_json(
        d,
        &["user", "import", "--from", csv.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(report["imported"], 1, "{report}");
    assert_eq!(report["skipped"], json!(["dup@example.com"]));
    let refused = report["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 2, "{report}");
    assert_eq!(refused[0]["at"], "line 4");
    assert!(refused[0]["reason"].as_str().unwrap().contains("bcrypt"));
    assert_eq!(refused[1]["at"], "line 5");
    let (code, out, _) = run_cli(
        d,
        &["user", "import", "--from", csv.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 0);
    assert!(out.contains("refused line 4"), "{out}");

    // With the server running, through the admin channel.
    let server = spawn_server(d, &[]);
    let realm = d.join("realm.json");
    std::fs::write(&realm, keycloak_realm()).unwrap();
    let (dd, rr) = (d.to_path_buf(), realm.clone());
    let report = tokio::task::spawn_blocking(move || {
        cli_json(
            &dd,
            &["user", "import", "--from", rr.to_str().unwrap(), "--json"],
            None,
        )
    })
    .await
    .unwrap();
    assert_eq!(report["imported"], 1, "{report}");
    assert_eq!(report["refused"][0]["at"], "user otp-only");

    assert_eq!(
        sign_in(&server.base, "ann@example.com", "wrong password").await,
        401
    );
    assert_eq!(
        sign_in(&server.base, "ann@example.com", "ann's old password").await,
        303
    );
    assert_eq!(
        sign_in(&server.base, "kay@example.com", "keycloak pass").await,
        303
    );
    // After the upgrade the same password still works (now against Argon2id).
    assert_eq!(
        sign_in(&server.base, "ann@example.com", "ann's old password").await,
        303
    );
    server.terminate();
    let store = Store::open(&d.join("pictor.redb")).unwrap();
    for email in ["ann@example.com", "kay@example.com"] {
        let u = store.user_by_email(email).unwrap().unwrap();
        assert!(
            u.password_hash.unwrap().starts_with("$argon2id$"),
            "{email} was not rehashed"
        );
    }
    assert_eq!(
        store
            .user_by_email("kay@example.com")
            .unwrap()
            .unwrap()
            .name,
        "Kay"
    );
}
