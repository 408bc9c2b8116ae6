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
        vec!["settings", "set", "prices.fast", "0"],
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
            "--init",
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

/// A command that works on the store never makes a new, empty one by mistake (a mistyped
/// folder, a missing PICTOR_DATA_DIR): it refuses and names the folder, unless `--init`. Every
/// command says on stderr which folder it worked on and whether a server was in between.
#[test]
fn admin_commands_never_create_a_store_silently_and_say_where_they_worked() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("typo");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pictor"))
            .env_remove("PICTOR_DATA_DIR")
            .env_remove("PICTOR_CONFIG")
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        vec!["user", "list", "--json"],
        vec!["user", "add", "--email", "a@example.com"],
        vec!["api-key", "issue", "--email", "a@example.com"],
        vec!["settings", "list"],
        vec!["signing-key", "rotate"],
        vec!["backup", "--to", "/tmp/never.tar"],
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} must refuse");
        assert!(
            err.contains("no Pictor store")
                && err.contains(&*data.to_string_lossy())
                && err.contains("--init"),
            "{args:?}: {err}"
        );
        assert!(!data.join("pictor.redb").exists(), "{args:?} made a store");
    }
    // `render` and `config show` need no store and make none.
    let out = run(&["config", "show", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!data.join("pictor.redb").exists());

    let out = run(&[
        "--init",
        "user",
        "add",
        "--email",
        "a@example.com",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("pictor: data folder {}", data.display()))
            && err.contains("opened directly"),
        "{err}"
    );
    // The store exists now: no --init needed; the old spellings `key`/`keys` still work.
    for args in [
        vec!["user", "show", "--email", "a@example.com", "--json"],
        vec!["key", "issue", "--email", "a@example.com", "--json"],
        vec!["keys", "rotate", "--json"],
    ] {
        let out = run(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `pictor settings`, the config file and `config show` use one spelling; `config show` prints
/// the stored values, not a pointer to another command.
#[test]
fn settings_have_one_spelling_and_config_show_prints_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let v = cli_json(dir.path(), &["settings", "list", "--json"], None);
    for key in [
        "prices.fast",
        "prices.edit",
        "limits.daily",
        "limits.daily_pro",
        "signup_credits",
        "registration_open",
        "app_daily_cap",
    ] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
    assert!(
        v.get("price.fast").is_none() && v.get("daily_limit").is_none(),
        "{v}"
    );
    // The older spellings are still understood.
    cli_json(
        dir.path(),
        &["settings", "set", "price.fast", "6", "--json"],
        None,
    );
    cli_json(
        dir.path(),
        &["settings", "set", "limits.daily", "9", "--json"],
        None,
    );
    let v = cli_json(dir.path(), &["settings", "list", "--json"], None);
    assert_eq!(
        (v["prices.fast"].as_u64(), v["limits.daily"].as_u64()),
        (Some(6), Some(9)),
        "{v}"
    );
    let shown = cli_json(dir.path(), &["config", "show", "--json"], None);
    assert_eq!(shown["values"]["prices.fast"]["value"], "6", "{shown}");
    assert_eq!(
        shown["values"]["prices.fast"]["source"],
        "store (pictor settings)"
    );
    assert_eq!(shown["values"]["limits.daily"]["value"], "9");
    assert!(
        !shown.to_string().contains("see `pictor settings list`"),
        "{shown}"
    );
}

/// Recovery from the command line: a reset link on the address the server answers on, and a
/// password set from standard input (never from the command line).
#[test]
fn reset_link_and_passwd() {
    let dir = tempfile::tempdir().unwrap();
    cli_json(
        dir.path(),
        &[
            "user",
            "add",
            "--email",
            "pat@example.com",
            "--password-stdin",
            "--json",
        ],
        Some("pat's first password\n"),
    );
    let v = cli_json(
        dir.path(),
        &["user", "reset-link", "--email", "pat@example.com", "--json"],
        None,
    );
    let url = v["reset_url"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:8080/reset?token="), "{v}");
    let (code, out, _) = run_cli(
        dir.path(),
        &["user", "reset-link", "--email", "pat@example.com"],
        None,
    );
    assert_eq!(code, 0);
    assert!(
        out.contains("/reset?token=") && out.contains("works once"),
        "{out}"
    );
    let (code, _, err) = run_cli(
        dir.path(),
        &["user", "reset-link", "--email", "nobody@example.com"],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("error"), "{err}");

    // Refused: no --password-stdin, a short password, an unknown person.
    let (code, _, _) = run_cli(
        dir.path(),
        &["user", "passwd", "--email", "pat@example.com"],
        None,
    );
    assert_eq!(code, 2, "--password-stdin is required");
    let (code, _, err) = run_cli(
        dir.path(),
        &[
            "user",
            "passwd",
            "--email",
            "pat@example.com",
            "--password-stdin",
        ],
        Some("short\n"),
    );
    assert_ne!(code, 0);
    assert!(err.contains("not accepted"), "{err}");
    let (code, _, _) = run_cli(
        dir.path(),
        &[
            "user",
            "passwd",
            "--email",
            "nobody@example.com",
            "--password-stdin",
        ],
        Some("a long enough password\n"),
    );
    assert_ne!(code, 0);
    let v = cli_json(
        dir.path(),
        &[
            "user",
            "passwd",
            "--email",
            "pat@example.com",
            "--password-stdin",
            "--json",
        ],
        Some("pat's second password\n"),
    );
    assert_eq!(v["email"], "pat@example.com");
    let store = pictor::store::Store::open(&dir.path().join("pictor.redb")).unwrap();
    let user = store.user_by_email("pat@example.com").unwrap().unwrap();
    let hash = user.password_hash.unwrap();
    assert!(pictor::auth::password::verify(
        "pat's second password",
        &hash
    ));
    assert!(!pictor::auth::password::verify(
        "pat's first password",
        &hash
    ));
}

/// `user remove` asks for `--yes`, then deletes the account; the only administrator stays.
#[test]
fn user_remove_needs_yes_and_keeps_the_last_administrator() {
    let dir = tempfile::tempdir().unwrap();
    cli_json(
        dir.path(),
        &[
            "user",
            "add",
            "--email",
            "ann@example.com",
            "--admin",
            "--json",
        ],
        None,
    );
    cli_json(
        dir.path(),
        &[
            "user",
            "add",
            "--email",
            "bob@example.com",
            "--credits",
            "7",
            "--json",
        ],
        None,
    );
    let (code, out, err) = run_cli(
        dir.path(),
        &["user", "remove", "--email", "bob@example.com"],
        None,
    );
    assert_ne!(code, 0);
    assert!(out.is_empty() && err.contains("--yes"), "{err}");
    cli_json(
        dir.path(),
        &["user", "show", "--email", "bob@example.com", "--json"],
        None,
    );
    let v = cli_json(
        dir.path(),
        &[
            "user",
            "remove",
            "--email",
            "bob@example.com",
            "--yes",
            "--json",
        ],
        None,
    );
    assert_eq!(v["balance_written_off"], 7, "{v}");
    let (code, _, _) = run_cli(
        dir.path(),
        &["user", "show", "--email", "bob@example.com"],
        None,
    );
    assert_ne!(code, 0, "gone");
    let (code, _, err) = run_cli(
        dir.path(),
        &["user", "remove", "--email", "ann@example.com", "--yes"],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("only administrator"), "{err}");
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
    // A reset link through the server carries the server's own address.
    let v = cli_json(
        dir.path(),
        &[
            "user",
            "reset-link",
            "--email",
            "alice@example.com",
            "--json",
        ],
        None,
    );
    assert!(
        v["reset_url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}/reset?token=", server.base)),
        "{v}"
    );
    // Each command says it went through the server.
    let (code, _, err) = run_cli(dir.path(), &["user", "list", "--json"], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("through the server running there") && err.contains("pid"),
        "{err}"
    );

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
    let (st, me) = server.get(&key, "/api/pictor/v1/me").await;
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

fn client_commands_work(dir: &std::path::Path) {
    let v = cli_json(
        dir,
        &[
            "client",
            "add",
            "--name",
            "shop",
            "--redirect-uri",
            "https://shop.example/cb",
            "--redirect-uri",
            "http://localhost:3000/cb",
            "--json",
        ],
        None,
    );
    assert_eq!(v["app_name"], "shop");
    let secret = v["app_secret"].as_str().unwrap();
    assert!(secret.starts_with("pcs_") && secret.len() > 40);
    assert_eq!(v.as_object().unwrap().len(), 2);
    let list = cli_json(dir, &["client", "list", "--json"], None);
    assert_eq!(list["clients"][0]["app_name"], "shop");
    assert_eq!(
        list["clients"][0]["redirect_uris"],
        json!(["https://shop.example/cb", "http://localhost:3000/cb"])
    );
    assert!(
        !list.to_string().contains(secret),
        "the secret is shown only once"
    );
    for args in [
        vec![
            "client",
            "add",
            "--name",
            "shop",
            "--redirect-uri",
            "https://x.example/cb",
        ],
        vec![
            "client",
            "add",
            "--name",
            "bad name",
            "--redirect-uri",
            "https://x.example/cb",
        ],
        vec![
            "client",
            "add",
            "--name",
            "evil",
            "--redirect-uri",
            "https://good.example@evil.example/cb",
        ],
        vec![
            "client",
            "add",
            "--name",
            "frag",
            "--redirect-uri",
            "https://x.example/cb#x",
        ],
        vec!["client", "add", "--name", "rel", "--redirect-uri", "/cb"],
        vec![
            "client",
            "add",
            "--name",
            "js",
            "--redirect-uri",
            "javascript:alert(1)",
        ],
        vec!["client", "remove", "--name", "nope"],
    ] {
        let (code, out, err) = run_cli(dir, &args, None);
        assert_ne!(code, 0, "{args:?} should fail");
        assert!(
            out.is_empty() && err.contains("error"),
            "{args:?}: {out} {err}"
        );
    }
    let (code, _, _) = run_cli(dir, &["client", "add", "--name", "x"], None);
    assert_eq!(code, 2, "--redirect-uri is required");
    let k = cli_json(dir, &["keys", "rotate", "--json"], None);
    assert!(k["kid"].as_str().unwrap().starts_with('k'));
    cli_json(dir, &["client", "remove", "--name", "shop", "--json"], None);
    assert_eq!(
        cli_json(dir, &["client", "list", "--json"], None)["clients"],
        json!([])
    );
}

#[test]
fn client_and_keys_commands_with_server_stopped() {
    let dir = tempfile::tempdir().unwrap();
    client_commands_work(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_and_keys_commands_with_server_running() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_server(dir.path(), &[]);
    let d = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || client_commands_work(&d))
        .await
        .unwrap();
    // The rotated key is live in the running server's JWKS.
    let jwks: serde_json::Value = reqwest::get(format!("{}/oauth/jwks", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2);
    server.terminate();
}

#[test]
fn first_start_prints_a_setup_link_until_an_administrator_exists() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let read_start = |dir: &std::path::Path| {
        let mut child = pictor_cmd(dir)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            let done = line.contains("Press Ctrl+C");
            lines.push(line);
            if done {
                break;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        lines.join("\n")
    };
    let first = read_start(dir.path());
    assert!(first.contains("/setup?token="), "{first}");
    cli_json(
        dir.path(),
        &["user", "add", "--email", "a@example.com", "--json"],
        None,
    );
    // An ordinary account does not end setup: the link is printed again.
    let second = read_start(dir.path());
    assert!(second.contains("/setup?token="), "{second}");
    cli_json(
        dir.path(),
        &[
            "user",
            "update",
            "--email",
            "a@example.com",
            "--admin",
            "true",
            "--json",
        ],
        None,
    );
    let third = read_start(dir.path());
    assert!(!third.contains("/setup?token="), "{third}");
}

/// Help shows no empty `[env: …=]` for unset variables, lists a command's own options before the
/// global ones (under their own heading), and `render` with the painter says what it wrote.
#[test]
fn help_is_grouped_and_render_says_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--help"][..], &["render", "--help"], &["serve", "--help"]] {
        let out = pictor_cmd(dir.path())
            .env_remove("PICTOR_CONFIG")
            .env_remove("PICTOR_DEVICE")
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {text}");
        assert!(
            !text.contains("=]"),
            "{args:?} shows an unset variable: {text}"
        );
        let own = text
            .find("\nOptions:")
            .unwrap_or_else(|| panic!("{args:?}: {text}"));
        let global = text
            .find("\nGlobal options:")
            .unwrap_or_else(|| panic!("{args:?}: {text}"));
        let data_dir = text.find("--data-dir").unwrap();
        assert!(own < global && global < data_dir, "{args:?}: {text}");
    }
    let png = dir.path().join("p.png");
    let (code, out, err) = run_cli(
        dir.path(),
        &[
            "render",
            "--prompt",
            "a red boat",
            "--seed",
            "3",
            "--out",
            png.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let said = format!("{out}{err}");
    assert!(
        said.contains("wrote") && said.contains("p.png") && said.contains("seed 3"),
        "{said}"
    );
    assert!(said.contains("1024x1024"), "{said}");
    // Its parameters say what the painter drew, as the server's pictures do.
    let text = pictor::render::encode::read_parameters(&std::fs::read(&png).unwrap()).unwrap();
    assert!(text.contains("Drawn: boat"), "{text}");
}
