//! Bounded reads of files Pictor does not control: files in model folders and checkpoints
//! (which may be links to devices, FIFOs or huge files) and the configuration files an operator
//! points at. Every read has a cap fitting its kind, and going over it is a clear error naming
//! the file, the cap and the size, before the bytes are held in memory. (Bodies from remote
//! servers are bounded by the server's `bounded` module.)
//!
//! | what | cap |
//! |---|---|
//! | a model's configuration files (`config.json`, `model_index.json`, scheduler and tokenizer configurations) | [`CONFIG_MAX`] 1 MiB |
//! | a tokenizer's `vocab.json`, `merges.txt` | [`TOKENIZER_MAX`] 4 MiB each |
//! | a safetensors header | 16 MiB and 65,536 tensors ([`crate::models::safetensors_header`]) |
//! | `config.toml`, a ComfyUI workflow file | [`CONFIG_FILE_MAX`] 1 MiB, [`WORKFLOW_MAX`] 4 MiB |

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A model's configuration files: real ones are a few KiB.
pub const CONFIG_MAX: u64 = 1 << 20;
/// A CLIP-sized tokenizer's `vocab.json` (~0.9 MiB) or `merges.txt` (~0.5 MiB).
pub const TOKENIZER_MAX: u64 = 4 << 20;
/// Pictor's own `config.toml`.
pub const CONFIG_FILE_MAX: u64 = 1 << 20;
/// A ComfyUI workflow exported in the API format (tens of KiB; shared ones up to a few hundred).
pub const WORKFLOW_MAX: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{} is {}, over the {} Pictor reads for {what}", path.display(), size_text(*size), size_text(*cap))]
    TooLarge {
        path: PathBuf,
        what: &'static str,
        size: u64,
        cap: u64,
    },
}

/// `1.5 MiB`, `48.0 MiB`, `512 bytes`.
/// Free bytes on the file system holding `path`, for an unprivileged process (`statvfs`);
/// `None` where it cannot be told.
#[cfg(unix)]
pub fn free_space(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statvfs` is a valid value of the plain C struct the call fills.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and outlives the call; `st` is a valid out-pointer.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    (rc == 0).then(|| (st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
pub fn free_space(_: &Path) -> Option<u64> {
    None
}

pub fn size_text(n: u64) -> String {
    const KIB: u64 = 1024;
    match n {
        0..KIB => format!("{n} bytes"),
        KIB..0x10_0000 => format!("{:.1} KiB", n as f64 / KIB as f64),
        0x10_0000..0x4000_0000 => format!("{:.1} MiB", n as f64 / 1048576.0),
        0x4000_0000..0x100_0000_0000 => format!("{:.1} GiB", n as f64 / 1073741824.0),
        _ => format!("{:.1} TiB", n as f64 / 1099511627776.0),
    }
}

fn kind_of(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_char_device() || ft.is_block_device() {
            return "a device";
        }
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a folder"
    } else {
        "not a file"
    }
}

/// Opens `path` (links followed) for reading if it is a regular file; its handle and size.
/// A device, FIFO, socket or folder is refused without being read, and the open itself does
/// not block on a FIFO put in place between the check and the open.
pub fn open_regular(path: &Path) -> Result<(File, u64), FileError> {
    let io = |err| FileError::Io {
        path: path.to_path_buf(),
        err,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    // What was opened, not what the name pointed at before.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(meta.file_type()),
        });
    }
    Ok((file, meta.len()))
}

/// Checks that `path` is a regular file of at most `cap` bytes without reading it; its size.
pub fn check_file(path: &Path, cap: u64, what: &'static str) -> Result<u64, FileError> {
    let (_, size) = open_regular(path)?;
    if size > cap {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            what,
            size,
            cap,
        });
    }
    Ok(size)
}

/// Reads a regular file of at most `cap` bytes (`what` names its kind in the error). A file
/// that grows while it is read is cut at `cap + 1` bytes and refused.
pub fn read_file(path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>, FileError> {
    let (file, size) = open_regular(path)?;
    let too_large = |size| FileError::TooLarge {
        path: path.to_path_buf(),
        what,
        size,
        cap,
    };
    if size > cap {
        return Err(too_large(size));
    }
    let mut buf = Vec::with_capacity(size as usize);
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|err| FileError::Io {
            path: path.to_path_buf(),
            err,
        })?;
    if buf.len() as u64 > cap {
        return Err(too_large(buf.len() as u64));
    }
    Ok(buf)
}

/// [`read_file`] as UTF-8 text.
pub fn read_text(path: &Path, cap: u64, what: &'static str) -> Result<String, FileError> {
    String::from_utf8(read_file(path, cap, what)?).map_err(|_| FileError::Io {
        path: path.to_path_buf(),
        err: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn devices_fifos_and_folders_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let zero = dir.path().join("config.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_file(&zero, CONFIG_MAX, "a configuration file").unwrap_err();
        assert!(e.to_string().contains("is a device"), "{e}");
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let e = read_file(&fifo, CONFIG_MAX, "x").unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let e = read_file(dir.path(), CONFIG_MAX, "x").unwrap_err();
        assert!(e.to_string().contains("a folder"), "{e}");
    }

    #[test]
    fn files_over_their_cap_are_refused_with_both_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vocab.json");
        std::fs::write(&p, vec![b' '; 5000]).unwrap();
        let e = read_file(&p, 4096, "a tokenizer vocabulary").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} is 4.9 KiB, over the 4.0 KiB Pictor reads for a tokenizer vocabulary",
                p.display()
            )
        );
        assert_eq!(read_file(&p, 5000, "x").unwrap().len(), 5000);
        assert_eq!(size_text(48 << 20), "48.0 MiB");
        assert_eq!(size_text(12), "12 bytes");
    }
}
