//! The GTK side of the tray on Linux: `gtk::init` on the main thread, an AppIndicator icon
//! (StatusNotifierItem + DBusMenu on the session bus, as desktops expect) with its menu, a timer
//! that handles menu clicks and refreshes the status, and `gtk::main` until Quit.

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gtk::glib;
use tokio::sync::watch;
use tracing::{info, warn};
use tray_icon::menu::{Menu, MenuEvent, MenuItem, PredefinedMenuItem};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};

use super::menu::{self as model, items};
use crate::app::ServerHandle;
use crate::cli::serve;
use crate::config::Config;
use crate::state::AppState;

/// How often the status lines are refreshed.
const REFRESH: Duration = Duration::from_secs(2);
/// How often menu clicks and the stop signal are looked at.
const POLL: Duration = Duration::from_millis(100);

pub fn serve(
    runtime: &tokio::runtime::Runtime,
    config: Config,
    config_file: Option<PathBuf>,
) -> anyhow::Result<()> {
    if let Err(e) = gtk::init() {
        warn!(error = %e, "cannot open a display for the tray icon (no desktop session?); serving without it");
        return runtime.block_on(serve::run(config, config_file));
    }
    let handle = runtime.block_on(serve::start(config, config_file))?;

    // Ctrl+C and SIGTERM stop the tray too, and through it the server.
    let (stop_tx, mut stop_rx) = watch::channel(false);
    runtime.spawn(async move {
        serve::shutdown_signal().await;
        let _ = stop_tx.send(true);
    });

    match Tray::build(&handle) {
        Ok(tray) => {
            println!("Tray icon shown: use its menu to open Pictor or quit (Ctrl+C works too).");
            tray.run(stop_rx);
            info!("tray closed");
        }
        Err(e) => {
            warn!(error = %e, "cannot show the tray icon; serving without it");
            println!("Press Ctrl+C to stop.");
            runtime.block_on(async {
                let _ = stop_rx.wait_for(|stop| *stop).await;
            });
        }
    }
    println!("Stopping…");
    runtime.block_on(handle.shutdown());
    Ok(())
}

/// The icon, its menu and what the menu acts on. Lives on the GTK thread only.
struct Tray {
    // Dropping the icon removes it from the desktop.
    _icon: TrayIcon,
    icon_dir: PathBuf,
    jobs: MenuItem,
    setup: MenuItem,
    pause: MenuItem,
    state: AppState,
    base_url: String,
    setup_url: Option<String>,
    /// The setup link has been used (or users exist): the item stays disabled from then on.
    setup_done: Cell<bool>,
}

impl Tray {
    fn build(handle: &ServerHandle) -> anyhow::Result<Tray> {
        let state = handle.state.clone();
        let stats = state.jobs.stats();
        let status = MenuItem::with_id(
            items::STATUS,
            model::status_line(&handle.base_url),
            false,
            None,
        );
        let jobs = MenuItem::with_id(items::JOBS, model::jobs_line(&stats), false, None);
        let open_app = MenuItem::with_id(items::OPEN_APP, items::OPEN_APP_LABEL, true, None);
        let open_docs = MenuItem::with_id(items::OPEN_DOCS, items::OPEN_DOCS_LABEL, true, None);
        let open_data = MenuItem::with_id(items::OPEN_DATA, items::OPEN_DATA_LABEL, true, None);
        let setup = MenuItem::with_id(
            items::COPY_SETUP,
            items::COPY_SETUP_LABEL,
            handle.setup_url.is_some(),
            None,
        );
        let pause = MenuItem::with_id(items::PAUSE, model::pause_label(stats.paused), true, None);
        let quit = MenuItem::with_id(items::QUIT, items::QUIT_LABEL, true, None);
        let menu = Menu::new();
        menu.append_items(&[
            &status,
            &jobs,
            &PredefinedMenuItem::separator(),
            &open_app,
            &open_docs,
            &open_data,
            &setup,
            &PredefinedMenuItem::separator(),
            &pause,
            &PredefinedMenuItem::separator(),
            &quit,
        ])?;

        let (rgba, width, height) =
            model::decode_rgba(model::ICON_PNG).map_err(|e| anyhow::anyhow!("tray icon: {e}"))?;
        let icon = Icon::from_rgba(rgba, width, height)?;
        // The AppIndicator reads the icon from a file. A folder per process keeps two Pictors
        // (two data folders) from overwriting or deleting each other's.
        let icon_dir = icon_dir();
        let builder = TrayIconBuilder::new()
            .with_id("pictor")
            .with_temp_dir_path(&icon_dir)
            .with_icon(icon)
            .with_tooltip("Pictor")
            .with_menu(Box::new(menu));
        let icon = build_icon(builder)?;
        Ok(Tray {
            _icon: icon,
            icon_dir,
            jobs,
            setup,
            pause,
            state,
            base_url: handle.base_url.clone(),
            setup_url: handle.setup_url.clone(),
            setup_done: Cell::new(handle.setup_url.is_none()),
        })
    }

    /// Runs the GTK main loop until Quit or `stop`.
    fn run(self, stop: watch::Receiver<bool>) {
        let tray = Rc::new(self);
        let mut last_refresh = Instant::now();
        let ticker = tray.clone();
        glib::timeout_add_local(POLL, move || {
            while let Ok(event) = MenuEvent::receiver().try_recv() {
                if ticker.on_click(event.id.as_ref()) {
                    gtk::main_quit();
                    return glib::ControlFlow::Break;
                }
            }
            if *stop.borrow() {
                info!("stop signal: closing the tray");
                gtk::main_quit();
                return glib::ControlFlow::Break;
            }
            if last_refresh.elapsed() >= REFRESH {
                last_refresh = Instant::now();
                ticker.refresh();
            }
            glib::ControlFlow::Continue
        });
        gtk::main();
        // The timer released its reference when it stopped: this drops the icon.
        let icon_dir = tray.icon_dir.clone();
        drop(tray);
        let _ = std::fs::remove_dir_all(icon_dir);
    }

    /// Acts on a click; true for Quit.
    fn on_click(&self, id: &str) -> bool {
        info!(item = id, "tray menu");
        match id {
            items::OPEN_APP => open(&model::app_url(&self.base_url)),
            items::OPEN_DOCS => open(&model::docs_url(&self.base_url)),
            items::OPEN_DATA => open(self.state.config.data_dir.as_os_str()),
            items::COPY_SETUP => self.copy_setup_link(),
            items::PAUSE => {
                let jobs = &self.state.jobs;
                jobs.set_paused(!jobs.is_paused());
                self.refresh();
            }
            items::QUIT => return true,
            _ => {}
        }
        false
    }

    fn copy_setup_link(&self) {
        self.refresh();
        let Some(url) = self.setup_url.as_deref().filter(|_| !self.setup_done.get()) else {
            return;
        };
        let clipboard = gtk::Clipboard::get(&gtk::gdk::SELECTION_CLIPBOARD);
        clipboard.set_text(url);
        // Hand it to a clipboard manager, if any, so it outlives this process.
        clipboard.store();
        info!("setup link copied to the clipboard");
    }

    /// Updates the job counters, the Pause/Resume label and whether the setup link still works.
    fn refresh(&self) {
        let stats = self.state.jobs.stats();
        self.jobs.set_text(model::jobs_line(&stats));
        self.pause.set_text(model::pause_label(stats.paused));
        if !self.setup_done.get() && !self.setup_link_works() {
            self.setup_done.set(true);
            self.setup.set_enabled(false);
        }
    }

    /// The one-time link works until it is used or an administrator is made another way.
    fn setup_link_works(&self) -> bool {
        let state = &self.state;
        let token_ok = self
            .setup_url
            .as_deref()
            .and_then(model::setup_token)
            .is_some_and(|t| state.idp.setup_token_matches(t));
        token_ok && !crate::web::setup_done(state)
    }
}

/// `$XDG_RUNTIME_DIR/pictor-tray-<pid>` (or under the temp folder).
fn icon_dir() -> PathBuf {
    let base = directories::BaseDirs::new()
        .and_then(|d| d.runtime_dir().map(|p| p.to_path_buf()))
        .unwrap_or_else(std::env::temp_dir);
    base.join(format!("pictor-tray-{}", std::process::id()))
}

fn open(target: &(impl AsRef<std::ffi::OsStr> + ?Sized)) {
    let target = target.as_ref();
    if let Err(e) = model::open_in_desktop(target) {
        warn!(target = %target.to_string_lossy(), error = %e, "cannot open it with the desktop's default application");
    }
}

/// Builds the icon. The AppIndicator library is loaded at run time and its absence is a panic in
/// the binding; turn that into an error so Pictor can go on headless.
fn build_icon(builder: TrayIconBuilder) -> anyhow::Result<TrayIcon> {
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.build()));
    std::panic::set_hook(previous_hook);
    match built {
        Ok(icon) => Ok(icon?),
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            anyhow::bail!(
                "the AppIndicator library could not be loaded (install libayatana-appindicator3-1): {}",
                message.lines().next().unwrap_or("")
            )
        }
    }
}
