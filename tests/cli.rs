//! The admin CLI, with the server stopped (direct on the file) and running (admin channel).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

fn admin_commands_work(dir: &std::path::Path) {
    let v = cli_json(
        dir,
        &[
            "user",
            "add",
            "--email",
            "Alice@Example.com",
            "--name",
            "Alice",
            "--password-stdin",
            "--credits",
            "5",
            "--json",
        ],
        Some("correct horse battery\n"),
    );
    assert_eq!(v["email"], "alice@example.com");
    assert_eq!(v["balance"], 5);
    assert!(v["user_id"].as_str().unwrap().starts_with("usr_"));
    let v = cli_json(
        dir,
        &[
            "credits",
            "grant",
            "--email",
            "alice@example.com",
            "--amount",
            "7",
            "--json",
        ],
        None,
    );
    assert_eq!(v, json!({"email": "alice@example.com", "balance": 12}));
    let v = cli_json(
        dir,
        &[
            "user",
            "update",
            "--email",
            "alice@example.com",
            "--pro",
            "true",
            "--daily-limit",
            "3",
            "--json",
        ],
        None,
    );
    assert_eq!(v["pro"], true);
    assert_eq!(v["daily_limit"], 3);
    let v = cli_json(
        dir,
        &["key", "issue", "--email", "alice@example.com", "--json"],
        None,
    );
    let key = v["api_key"].as_str().unwrap();
    assert!(key.starts_with("vx_") && key.len() == 67);
    assert_eq!(v.as_object().unwrap().len(), 1);

    // Errors: message on stderr, nonzero exit, nothing on stdout.
    for args in [
        vec![
            "credits",
            "grant",
            "--email",
            "nobody@example.com",
            "--amount",
            "5",
        ],
        vec![
            "credits",
            "grant",
            "--email",
            "alice@example.com",
            "--amount",
            "0",
        ],
        vec![
            "credits",
            "grant",
            "--email",
            "alice@example.com",
            "--amount",
            "-1000",
        ],
        vec!["key", "issue", "--email", "nobody@example.com", "--json"],
        vec![
            "user",
            "update",
            "--email",
            "nobody@example.com",
            "--pro",
            "true",
        ],
        vec!["user", "update", "--email", "alice@example.com"],
        vec!["user", "add", "--email", "alice@example.com"],
        vec!["user", "add", "--email", "not-an-email"],
        vec!["settings", "set", "price.nope", "3"],
        vec!["settings", "set", "price.fast", "0"],
    ] {
        let (code, out, err) = run_cli(dir, &args, None);
        assert_ne!(code, 0, "{args:?} should fail");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains("error"), "{args:?}: {err}");
    }
    let (code, _, err) = run_cli(
        dir,
        &[
            "user",
            "update",
            "--email",
            "alice@example.com",
            "--daily-limit",
            "abc",
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    // Balance unchanged by the refused grants.
    let v = cli_json(
        dir,
        &["user", "show", "--email", "alice@example.com", "--json"],
        None,
    );
    assert_eq!(v["balance"], 12);
}

#[test]
fn cli_with_server_stopped() {
    let dir = tempfile::tempdir().unwrap();
    admin_commands_work(dir.path());
}

#[test]
fn data_dir_flag_works_before_and_after_the_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pictor"))
        .env_remove("PICTOR_DATA_DIR")
        .args([
            "--data-dir",
            d,
            "user",
            "add",
            "--email",
            "f@example.com",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pictor"))
        .env_remove("PICTOR_DATA_DIR")
        .args([
            "user",
            "show",
            "--email",
            "f@example.com",
            "--json",
            "--data-dir",
            d,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("pictor.redb").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_with_server_running_goes_through_admin_channel() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_server(dir.path(), &[]);
    let admin = dir.path().join("admin.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&admin).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let d = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || admin_commands_work(&d))
        .await
        .unwrap();

    // A key issued through the running server works against it at once; the old one does not.
    let d = dir.path().to_path_buf();
    let key = cli_json(
        &d,
        &["key", "issue", "--email", "alice@example.com", "--json"],
        None,
    )["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let client = reqwest::Client::new();
    let r = client
        .get(format!("{}/api/pictor/v1/me", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let (st, me) = status_json(r).await;
    assert_eq!(st, 200, "{me}");
    assert_eq!(me["balance"], 12);
    assert_eq!(me["pro"], true);

    // SIGTERM: graceful stop, admin file removed, exit 0.
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(!admin.exists());
    // And the CLI works on the file again.
    let v = cli_json(
        dir.path(),
        &["user", "show", "--email", "alice@example.com", "--json"],
        None,
    );
    assert_eq!(v["balance"], 12);
    let _ = Duration::from_secs(0);
}
