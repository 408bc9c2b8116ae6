//! What the tray menu shows and does, independent of the GUI toolkit: item ids and labels, the
//! status lines, the icon pixels, and opening a URL or folder with the desktop's default handler.

use std::ffi::OsStr;
use std::io::Cursor;

use crate::jobs::EngineStats;

/// Menu item ids (what a menu event carries) and their fixed labels.
pub mod items {
    pub const STATUS: &str = "status";
    pub const JOBS: &str = "jobs";
    pub const OPEN_APP: &str = "open_app";
    pub const OPEN_DOCS: &str = "open_docs";
    pub const OPEN_DATA: &str = "open_data";
    pub const COPY_SETUP: &str = "copy_setup";
    pub const PAUSE: &str = "pause";
    pub const QUIT: &str = "quit";

    pub const OPEN_APP_LABEL: &str = "Open Pictor";
    pub const OPEN_DOCS_LABEL: &str = "Open API docs";
    pub const OPEN_DATA_LABEL: &str = "Open data folder";
    pub const COPY_SETUP_LABEL: &str = "Copy setup link";
    pub const PAUSE_LABEL: &str = "Pause rendering";
    pub const RESUME_LABEL: &str = "Resume rendering";
    pub const QUIT_LABEL: &str = "Quit Pictor";
}

/// The tray icon (64×64, drawn from `assets/static/icon.svg`).
pub const ICON_PNG: &[u8] = include_bytes!("../../assets/icons/pictor-64.png");

/// First status line: the server is up, and where.
pub fn status_line(base_url: &str) -> String {
    format!("Running at {base_url}")
}

/// Second status line: the job engine's counters.
pub fn jobs_line(stats: &EngineStats) -> String {
    let mut line = format!(
        "Jobs: {} queued, {} rendering (of {})",
        stats.waiting, stats.rendering, stats.workers
    );
    if stats.paused {
        line.push_str(" — paused");
    }
    line
}

/// The label of the Pause/Resume item for the current state.
pub fn pause_label(paused: bool) -> &'static str {
    if paused {
        items::RESUME_LABEL
    } else {
        items::PAUSE_LABEL
    }
}

/// The API docs page of a server at `base_url`.
pub fn docs_url(base_url: &str) -> String {
    format!("{}/api/pictor/docs", base_url.trim_end_matches('/'))
}

/// The start page of a server at `base_url`.
pub fn app_url(base_url: &str) -> String {
    format!("{}/", base_url.trim_end_matches('/'))
}

/// The token of a setup link (`…/setup?token=…`), to ask the server whether it still works.
pub fn setup_token(setup_url: &str) -> Option<&str> {
    setup_url
        .split_once("?token=")
        .map(|(_, t)| t)
        .filter(|t| !t.is_empty())
}

/// Decodes a PNG into 8-bit RGBA pixels: `(rgba, width, height)`.
pub fn decode_rgba(png_bytes: &[u8]) -> Result<(Vec<u8>, u32, u32), String> {
    let mut decoder = png::Decoder::new(Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| "the icon is too large".to_string())?;
    let mut buf = vec![0; size];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    buf.truncate(info.buffer_size());
    let rgba = match (info.color_type, info.bit_depth) {
        (png::ColorType::Rgba, png::BitDepth::Eight) => buf,
        (png::ColorType::Rgb, png::BitDepth::Eight) => buf
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        (color, depth) => return Err(format!("unsupported icon format {color:?}/{depth:?}")),
    };
    Ok((rgba, info.width, info.height))
}

/// Opens a URL or a folder with the desktop's default handler (`xdg-open` on Linux and the BSDs,
/// `open` on macOS, `explorer` on Windows), without waiting for it.
pub fn open_in_desktop(target: &OsStr) -> std::io::Result<()> {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    let mut child = std::process::Command::new(program)
        .arg(target)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    // Reap it when it exits (xdg-open returns at once; a browser it starts lives on).
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_labels() {
        let stats = EngineStats {
            waiting: 3,
            rendering: 1,
            workers: 2,
            paused: false,
        };
        assert_eq!(jobs_line(&stats), "Jobs: 3 queued, 1 rendering (of 2)");
        let paused = EngineStats {
            paused: true,
            ..stats
        };
        assert_eq!(
            jobs_line(&paused),
            "Jobs: 3 queued, 1 rendering (of 2) — paused"
        );
        assert_eq!(pause_label(false), items::PAUSE_LABEL);
        assert_eq!(pause_label(true), items::RESUME_LABEL);
        assert_eq!(
            status_line("http://127.0.0.1:8080"),
            "Running at http://127.0.0.1:8080"
        );
        assert_eq!(
            docs_url("http://h:1/"),
            "http://h:1/api/pictor/docs".to_string()
        );
        assert_eq!(app_url("http://h:1"), "http://h:1/");
        assert_eq!(setup_token("http://h/setup?token=abc"), Some("abc"));
        assert_eq!(setup_token("http://h/setup?token="), None);
    }

    #[test]
    fn icon_decodes_to_64x64_rgba() {
        let (rgba, w, h) = decode_rgba(ICON_PNG).unwrap();
        assert_eq!((w, h), (64, 64));
        assert_eq!(rgba.len(), 64 * 64 * 4);
        // Transparent rounded corner, opaque brand blue in the middle.
        assert_eq!(rgba[3], 0);
        let mid = (32 * 64 + 4) * 4;
        assert_eq!(&rgba[mid..mid + 4], &[75, 79, 214, 255]);
    }
}
