//! The tray controller.
//!
//! Every build: pausing the job engine (what the tray's Pause/Resume item does) keeps jobs queued
//! until it is resumed.
//!
//! With `--features tray`: the real binary, `pictor serve --tray`, on a private X server (Xvfb) and
//! a private session bus, checked the way a desktop sees it: the StatusNotifierItem and its
//! DBusMenu on the bus (labels, enabled states), Pause, Resume and Quit clicked through DBusMenu
//! `Event`; and, with `trayer`, `xdotool`, ImageMagick's `import` and `xclip`, the icon docked in
//! a classic system tray, clicked like a user, the open menu saved as a screenshot
//! (`target/tmp/tray-menu.png`), and Copy setup link checked on the clipboard. Quit must shut the
//! server down gracefully. Without a display, `--tray` serves headless with a warning. Under
//! `PICTOR_CI=1` missing tools are a failure; otherwise the test says why and skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_rendering_keeps_jobs_queued_until_resumed() {
    let server = TestServer::start().await;
    let (_, key) = server.user("paused@example.com", 50, false);
    let jobs = server.handle.as_ref().unwrap().state.jobs.clone();
    assert!(!jobs.is_paused());

    jobs.set_paused(true);
    assert!(jobs.is_paused());
    let (status, created) = server
        .generate(&key, json!({"prompt": "a red balloon", "model": "fast"}))
        .await;
    assert_eq!(status, 202, "{created}");
    let job_id = created["job_id"].as_str().unwrap().to_string();

    // A long-poll runs out with the job still queued, nothing charged yet.
    let (status, job) = server
        .get(&key, &format!("/api/pictor/v1/jobs/{job_id}?wait=2"))
        .await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["status"], "queued", "{job}");
    let stats = jobs.stats();
    assert!(stats.paused);
    assert_eq!((stats.waiting, stats.rendering), (1, 0));
    assert_eq!(server.me(&key).await["balance"], 50);

    jobs.set_paused(false);
    let done = server.finish(&key, &job_id).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["balance"], 49, "{done}");
    assert_eq!(jobs.stats().waiting, 0);
    server.assert_books_balanced();
}

#[cfg(feature = "tray")]
mod desktop {
    use std::io::{BufRead, BufReader};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::common::*;

    const SCREEN: (u32, u32) = (640, 400);

    fn on_path(tool: &str) -> bool {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    }

    /// Under `PICTOR_CI=1` a missing prerequisite fails the test; otherwise it is skipped.
    fn skip_or_fail(why: &str) {
        if std::env::var("PICTOR_CI").is_ok_and(|v| v == "1") {
            panic!("tray test cannot run under PICTOR_CI=1: {why}");
        }
        eprintln!("SKIPPED tray desktop test: {why}");
    }

    /// A child process killed (and reaped) when the test ends, however it ends.
    struct Guard(Child);

    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Starts `cmd` and returns it with the first line it prints on stdout.
    fn spawn_reporting(mut cmd: Command, what: &str) -> (Guard, String) {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped());
        let mut child = Guard(cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}")));
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = tx.send(first.trim().to_string());
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{what} did not start"));
        assert!(!line.is_empty(), "{what} printed nothing");
        (child, line)
    }

    /// The private desktop: an X server, a session bus and (when available) a system tray.
    struct Desktop {
        display: String,
        bus: String,
        _x: Guard,
        _bus: Guard,
        tray_host: Option<Guard>,
    }

    impl Desktop {
        fn start(with_tray_host: bool) -> Desktop {
            let mut x = Command::new("Xvfb");
            x.args(["-displayfd", "1", "-nolisten", "tcp", "-screen", "0"])
                .arg(format!("{}x{}x24", SCREEN.0, SCREEN.1))
                .stderr(Stdio::null());
            let (x, number) = spawn_reporting(x, "Xvfb");
            let display = format!(":{number}");
            let mut bus = Command::new("dbus-daemon");
            bus.args(["--session", "--nofork", "--print-address=1"])
                .stderr(Stdio::null());
            let (bus_guard, bus) = spawn_reporting(bus, "dbus-daemon");
            let tray_host = with_tray_host.then(|| {
                // An XEmbed system tray at the top right. With no StatusNotifierWatcher on the
                // bus, the AppIndicator also docks a classic status icon there.
                let child = Command::new("trayer")
                    .args([
                        "--edge",
                        "top",
                        "--align",
                        "right",
                        "--widthtype",
                        "request",
                    ])
                    .args([
                        "--height",
                        "32",
                        "--transparent",
                        "false",
                        "--tint",
                        "0x333333",
                    ])
                    .env("DISPLAY", &display)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                std::thread::sleep(Duration::from_millis(500));
                Guard(child)
            });
            Desktop {
                display,
                bus,
                _x: x,
                _bus: bus_guard,
                tray_host,
            }
        }

        fn command(&self, program: &str) -> Command {
            let mut cmd = Command::new(program);
            cmd.env("DISPLAY", &self.display)
                .env("DBUS_SESSION_BUS_ADDRESS", &self.bus)
                .env("NO_AT_BRIDGE", "1")
                .env("GDK_BACKEND", "x11");
            cmd
        }

        /// `gdbus call` on the session bus; the printed GVariant text.
        fn call(&self, dest: &str, path: &str, method: &str, args: &[&str]) -> String {
            let out = self
                .command("gdbus")
                .args(["call", "--session", "--dest", dest, "--object-path", path])
                .args(["--method", method, "--"])
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "gdbus {method} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }

        fn try_call(&self, dest: &str, path: &str, method: &str, args: &[&str]) -> Option<String> {
            let out = self
                .command("gdbus")
                .args(["call", "--session", "--dest", dest, "--object-path", path])
                .args(["--method", method, "--"])
                .args(args)
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        }

        /// The unique bus names owned by process `pid`.
        fn names_of(&self, pid: u32) -> Vec<String> {
            let bus = "org.freedesktop.DBus";
            let names = self.call(
                bus,
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.ListNames",
                &[],
            );
            quoted(&names)
                .into_iter()
                .filter(|n| n.starts_with(':'))
                .filter(|n| {
                    self.try_call(
                        bus,
                        "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.GetConnectionUnixProcessID",
                        &[n],
                    )
                    .is_some_and(|out| out.contains(&format!("uint32 {pid},")))
                })
                .collect()
        }

        /// (bus name, object path) of the StatusNotifierItem exported by `pid`.
        fn find_item(&self, pid: u32) -> Option<(String, String)> {
            for name in self.names_of(pid) {
                let out = self
                    .command("gdbus")
                    .args(["introspect", "--session", "--dest", &name])
                    .args(["--object-path", "/", "--recurse"])
                    .output()
                    .ok()?;
                let text = String::from_utf8_lossy(&out.stdout);
                let mut node = "";
                for line in text.lines().map(str::trim) {
                    if let Some(rest) = line.strip_prefix("node ") {
                        node = rest.trim_end_matches('{').trim();
                    } else if line.starts_with("interface org.kde.StatusNotifierItem") {
                        return Some((name, node.to_string()));
                    }
                }
            }
            None
        }
    }

    /// The log without its colour codes.
    fn strip_ansi(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// The single-quoted strings of a GVariant text.
    fn quoted(text: &str) -> Vec<String> {
        text.split('\'')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    #[derive(Debug)]
    struct Item {
        id: i32,
        label: String,
        enabled: bool,
    }

    /// Menu items (separators left out) from a `com.canonical.dbusmenu.GetLayout` answer.
    fn parse_layout(text: &str) -> Vec<Item> {
        text.split("<(")
            .skip(1)
            .filter(|chunk| !chunk.contains("'type': <'separator'>"))
            .filter_map(|chunk| {
                let id = chunk.split(',').next()?.trim().parse().ok()?;
                let label = chunk.split("'label': <'").nth(1)?.split("'>").next()?;
                Some(Item {
                    id,
                    label: label.to_string(),
                    enabled: !chunk.contains("'enabled': <false>"),
                })
            })
            .collect()
    }

    struct Tray<'a> {
        desktop: &'a Desktop,
        name: String,
        menu: String,
    }

    impl Tray<'_> {
        fn items(&self) -> Vec<Item> {
            let layout = self.desktop.call(
                &self.name,
                &self.menu,
                "com.canonical.dbusmenu.GetLayout",
                &["0", "-1", "@as []"],
            );
            parse_layout(&layout)
        }

        fn item(&self, label_start: &str) -> Item {
            self.items()
                .into_iter()
                .find(|i| i.label.starts_with(label_start))
                .unwrap_or_else(|| panic!("no menu item {label_start:?} in {:?}", self.items()))
        }

        /// Clicks an item the way a desktop's tray host does.
        fn click(&self, label_start: &str) {
            let id = self.item(label_start).id.to_string();
            self.desktop.call(
                &self.name,
                &self.menu,
                "com.canonical.dbusmenu.Event",
                &[&id, "clicked", "<0>", "0"],
            );
        }

        /// Waits (the tray refreshes every 2 s) until an item shows `check`.
        fn wait_for(&self, what: &str, check: impl Fn(&[Item]) -> bool) {
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let items = self.items();
                if check(&items) {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "menu never showed {what}: {items:?}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn screenshot(desktop: &Desktop, path: &Path) -> image::RgbImage {
        let status = desktop
            .command("import")
            .args(["-window", "root"])
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "import failed");
        image::open(path).unwrap().to_rgb8()
    }

    /// Pixels of the icon's brand blue in the tray host's rightmost 32×32 cell (top right).
    fn icon_pixels(shot: &image::RgbImage) -> usize {
        let w = shot.width();
        (w - 32..w)
            .flat_map(|x| (0..32).map(move |y| (x, y)))
            .filter(|&(x, y)| {
                let p = shot.get_pixel(x, y).0;
                p[2] > 180 && p[0] < 120 && p[1] < 120
            })
            .count()
    }

    /// Light pixels where the menu opens, under the icon (the screen is black otherwise).
    fn menu_pixels(shot: &image::RgbImage) -> usize {
        let w = shot.width();
        (w - 240..w - 20)
            .flat_map(|x| (50..200).map(move |y| (x, y)))
            .filter(|&(x, y)| shot.get_pixel(x, y).0.iter().all(|&c| c > 200))
            .count()
    }

    /// Waits for the icon to dock in the tray host, clicks it like a user, and screenshots the
    /// open menu.
    fn screenshot_menu(desktop: &Desktop, path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while icon_pixels(&screenshot(desktop, path)) < 200 {
            assert!(
                Instant::now() < deadline,
                "the tray icon never showed in the system tray"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        let x = (SCREEN.0 - 16).to_string();
        for _ in 0..10 {
            let clicked = desktop
                .command("xdotool")
                .args(["mousemove", &x, "16", "click", "1"])
                .status()
                .unwrap();
            assert!(clicked.success());
            std::thread::sleep(Duration::from_millis(800));
            if menu_pixels(&screenshot(desktop, path)) > 220 * 150 / 2 {
                let _ = desktop.command("xdotool").args(["key", "Escape"]).status();
                return;
            }
        }
        panic!("clicking the tray icon did not open its menu");
    }

    #[test]
    fn without_a_display_tray_serves_headless_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("pictor.log");
        let mut child = Guard(
            pictor_cmd(&dir.path().join("data"))
                .args(["serve", "--tray", "--listen", "127.0.0.1:0"])
                .env_remove("DISPLAY")
                .env_remove("WAYLAND_DISPLAY")
                .env("PICTOR_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log_path).unwrap())
                .spawn()
                .unwrap(),
        );
        let mut base = None;
        // Kept open until the end: the server prints "Stopping…" when it gets SIGTERM.
        let mut stdout = BufReader::new(child.0.stdout.take().unwrap()).lines();
        for line in stdout.by_ref() {
            let line = line.unwrap();
            if let Some(url) = line.split("is running at ").nth(1) {
                base = Some(url.trim().to_string());
            }
            if line.contains("Press Ctrl+C") {
                break;
            }
        }
        let base = base.expect("server did not start");
        let health = block_on(async { reqwest::get(format!("{base}/healthz")).await.unwrap() });
        assert_eq!(health.status(), 200);
        let term = Command::new("kill")
            .args(["-TERM", &child.0.id().to_string()])
            .status()
            .unwrap();
        assert!(term.success());
        assert!(child.0.wait().unwrap().success());
        assert!(stdout.any(|l| l.is_ok_and(|l| l.contains("Stopping"))));
        let log = strip_ansi(&std::fs::read_to_string(&log_path).unwrap());
        assert!(
            log.contains("cannot open a display for the tray icon")
                && log.contains("serving without it"),
            "{log}"
        );
    }

    #[test]
    fn tray_menu_on_the_session_bus_and_quit_stops_gracefully() {
        let missing: Vec<&str> = ["Xvfb", "dbus-daemon", "gdbus"]
            .into_iter()
            .filter(|t| !on_path(t))
            .collect();
        if !missing.is_empty() {
            return skip_or_fail(&format!(
                "missing {missing:?} (apt-get install xvfb dbus libglib2.0-bin)"
            ));
        }
        let screenshot_tools: Vec<&str> = ["trayer", "xdotool", "import", "xclip"]
            .into_iter()
            .filter(|t| !on_path(t))
            .collect();
        if !screenshot_tools.is_empty() {
            if std::env::var("PICTOR_CI").is_ok_and(|v| v == "1") {
                panic!(
                    "missing {screenshot_tools:?} for the tray screenshot (apt-get install trayer xdotool imagemagick xclip)"
                );
            }
            eprintln!("no screenshot: missing {screenshot_tools:?}");
        }
        let desktop = Desktop::start(screenshot_tools.is_empty());

        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let log_path = dir.path().join("pictor.log");
        // A stand-in for the desktop's `xdg-open` that notes what it was asked to open.
        let bin = dir.path().join("bin");
        let opened = dir.path().join("opened.txt");
        std::fs::create_dir(&bin).unwrap();
        let xdg_open = bin.join("xdg-open");
        std::fs::write(
            &xdg_open,
            format!("#!/bin/sh\necho \"$1\" >> '{}'\n", opened.display()),
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&xdg_open, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )))
        .unwrap();
        let mut cmd = desktop.command(env!("CARGO_BIN_EXE_pictor"));
        cmd.args(["serve", "--tray", "--listen", "127.0.0.1:0"])
            .env("PATH", path)
            .env("PICTOR_DATA_DIR", &data)
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("PICTOR_LOG", "info")
            .env_remove("PICTOR_CONFIG")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log_path).unwrap());
        let mut child = Guard(cmd.spawn().unwrap());
        let pid = child.0.id();
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stdout_lines = Vec::new();
        let mut base = None;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
                if child.0.try_wait().unwrap().is_some() {
                    break;
                }
                continue;
            };
            if let Some(url) = line.split("is running at ").nth(1) {
                base = Some(url.trim().to_string());
            }
            let tray_up = line.contains("Tray icon shown") || line.contains("Press Ctrl+C");
            stdout_lines.push(line);
            if tray_up {
                break;
            }
        }
        let log = || strip_ansi(&std::fs::read_to_string(&log_path).unwrap_or_default());
        let base =
            base.unwrap_or_else(|| panic!("server did not start: {stdout_lines:?}\n{}", log()));
        if !stdout_lines.iter().any(|l| l.contains("Tray icon shown")) {
            return skip_or_fail(&format!(
                "the tray icon could not be shown (AppIndicator library missing?):\n{}",
                log()
            ));
        }
        let setup_link = stdout_lines
            .iter()
            .find(|l| l.contains("/setup?token="))
            .map(|l| l.trim().to_string())
            .expect("first start prints the setup link");

        // The desktop's view: a StatusNotifierItem, active, with an icon and a menu.
        let deadline = Instant::now() + Duration::from_secs(20);
        let (name, item_path) = loop {
            if let Some(found) = desktop.find_item(pid) {
                break found;
            }
            assert!(
                Instant::now() < deadline,
                "no StatusNotifierItem on the bus:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(250));
        };
        let props = desktop.call(
            &name,
            &item_path,
            "org.freedesktop.DBus.Properties.GetAll",
            &["org.kde.StatusNotifierItem"],
        );
        assert!(props.contains("'Status': <'Active'>"), "{props}");
        let icon_file = props
            .split("'IconName': <'")
            .nth(1)
            .and_then(|s| s.split('\'').next())
            .unwrap()
            .to_string();
        let icon = image::open(&icon_file).unwrap();
        assert_eq!((icon.width(), icon.height()), (64, 64), "{icon_file}");
        let menu = props
            .split("'Menu': <objectpath '")
            .nth(1)
            .and_then(|s| s.split('\'').next())
            .unwrap()
            .to_string();
        let tray = Tray {
            desktop: &desktop,
            name,
            menu,
        };

        let items = tray.items();
        let labels: Vec<&str> = items.iter().map(|i| i.label.as_str()).collect();
        assert_eq!(labels.len(), 8, "{items:?}");
        assert_eq!(labels[0], format!("Running at {base}"));
        assert!(
            labels[1].starts_with("Jobs: 0 queued, 0 rendering (of "),
            "{items:?}"
        );
        assert_eq!(
            labels[2..],
            [
                "Open Pictor",
                "Open API docs",
                "Open data folder",
                "Copy setup link",
                "Pause rendering",
                "Quit Pictor",
            ],
            "{items:?}"
        );
        let enabled: Vec<bool> = items.iter().map(|i| i.enabled).collect();
        assert_eq!(enabled, [false, false, true, true, true, true, true, true]);

        if desktop.tray_host.is_some() {
            let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tray-menu.png");
            screenshot_menu(&desktop, &shot);
            eprintln!("screenshot of the open tray menu: {}", shot.display());
        }

        // Copy setup link puts the link on the clipboard (served by Pictor's GTK loop).
        if desktop.tray_host.is_some() {
            tray.click("Copy setup link");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let out = desktop
                    .command("xclip")
                    .args(["-selection", "clipboard", "-o"])
                    .output()
                    .unwrap();
                if String::from_utf8_lossy(&out.stdout).trim() == setup_link {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the clipboard never got the setup link"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }

        // The Open items hand the page or the folder to the desktop's default application.
        tray.click("Open Pictor");
        tray.click("Open API docs");
        tray.click("Open data folder");
        // (Three processes append to the file: compare in any order.)
        let mut expected = vec![
            format!("{base}/"),
            format!("{base}/api/pictor/docs"),
            data.display().to_string(),
        ];
        expected.sort();
        let calls = || {
            let mut lines: Vec<String> = std::fs::read_to_string(&opened)
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect();
            lines.sort();
            lines
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while calls() != expected {
            assert!(
                Instant::now() < deadline,
                "xdg-open calls: {:?}, expected {expected:?}",
                calls()
            );
            std::thread::sleep(Duration::from_millis(100));
        }

        // Pause from the menu: the label flips, and a new job waits.
        tray.click("Pause rendering");
        tray.wait_for("Resume rendering", |items| {
            items.iter().any(|i| i.label == "Resume rendering")
                && items.iter().any(|i| i.label.ends_with("— paused"))
        });
        cli_json(
            &data,
            &[
                "user",
                "add",
                "--email",
                "tray@example.com",
                "--admin",
                "--credits",
                "10",
                "--json",
            ],
            None,
        );
        let key = cli_json(
            &data,
            &["key", "issue", "--email", "tray@example.com", "--json"],
            None,
        )["api_key"]
            .as_str()
            .unwrap()
            .to_string();
        // An administrator now exists: the setup link is no use any more.
        tray.wait_for("the setup link disabled", |items| {
            items
                .iter()
                .any(|i| i.label == "Copy setup link" && !i.enabled)
        });
        let http = reqwest::Client::new();
        let job: serde_json::Value = block_on(async {
            http.post(format!("{base}/api/pictor/v1/generate"))
                .bearer_auth(&key)
                .json(&serde_json::json!({"prompt": "a lighthouse", "model": "fast"}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        });
        let job_url = format!(
            "{base}/api/pictor/v1/jobs/{}",
            job["job_id"].as_str().unwrap()
        );
        tray.wait_for("one queued job", |items| {
            items.iter().any(|i| i.label.starts_with("Jobs: 1 queued"))
        });
        let poll = |wait: u32| -> serde_json::Value {
            block_on(async {
                http.get(format!("{job_url}?wait={wait}"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap()
            })
        };
        assert_eq!(poll(1)["status"], "queued");
        tray.click("Resume rendering");
        let mut done = poll(60);
        for _ in 0..3 {
            if done["status"] == "done" {
                break;
            }
            done = poll(60);
        }
        assert_eq!(done["status"], "done", "{done}");
        tray.wait_for("Pause rendering", |items| {
            items.iter().any(|i| i.label == "Pause rendering")
        });

        // Quit from the menu: the process ends by itself, cleanly, and the server is gone.
        let admin_file = data.join("admin.json");
        assert!(admin_file.exists());
        tray.click("Quit Pictor");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "Quit did not stop Pictor:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "{status}:\n{}", log());
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
            stdout_lines.push(line);
        }
        assert!(
            stdout_lines.iter().any(|l| l.contains("Stopping")),
            "{stdout_lines:?}"
        );
        let log = log();
        assert!(log.contains("item=\"quit\""), "{log}");
        assert!(log.contains("initiate graceful shutdown"), "{log}");
        assert!(!log.contains("jobs still running at shutdown"), "{log}");
        // The graceful path removes the admin channel file; a kill would leave it.
        assert!(!admin_file.exists(), "admin.json left behind:\n{log}");
        let refused = block_on(async { http.get(format!("{base}/healthz")).send().await });
        assert!(refused.is_err(), "the server still answers after Quit");
        // The icon's folder is cleaned up.
        assert!(!Path::new(&icon_file).exists(), "{icon_file} left behind");
    }
}
