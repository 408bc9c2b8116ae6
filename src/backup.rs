//! Backups: `pictor backup --to FILE` writes one tar archive with a consistent snapshot of the
//! store (one read transaction, copied table by table into a fresh redb file) and the data
//! folder's pictures, uploads, avatars and secret key; `pictor restore --from FILE` unpacks it
//! into an empty data folder. The server keeps serving during a backup.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let what = what.into();
    move |e| BackupError::Io(what, e)
}

/// Folders of the data dir that go into a backup (the store file is snapshotted separately).
const FOLDERS: [&str; 3] = ["images", "sources", "avatars"];

/// Writes the backup archive `to` (atomically: a temporary file renamed at the end).
pub fn backup(store: &Store, data_dir: &Path, to: &Path) -> Result<Value, BackupError> {
    if to.is_dir() {
        return Err(BackupError::Invalid(format!(
            "{} is a folder; give a file name",
            to.display()
        )));
    }
    let snapshot = to.with_extension("redb-snapshot.tmp");
    let _ = std::fs::remove_file(&snapshot);
    // The snapshot first: every picture a committed job names was written before that commit, so
    // copying the folders afterwards cannot miss one.
    store.snapshot_to(&snapshot)?;
    let partial = to.with_extension("partial");
    // Owner-only from the first byte (the archive holds the key that unseals the signing keys),
    // created new so a file or link planted at that name is never followed.
    let _ = std::fs::remove_file(&partial);
    let result = (|| {
        let file = crate::store::new_private_file(&partial)
            .map_err(io(format!("cannot create {}", partial.display())))?;
        let mut tar = tar::Builder::new(file);
        tar.append_path_with_name(&snapshot, "pictor.redb")
            .map_err(io("cannot add the store snapshot"))?;
        let key = data_dir.join("secret.key");
        if key.exists() {
            tar.append_path_with_name(&key, "secret.key")
                .map_err(io("cannot add secret.key"))?;
        }
        let mut files = 0usize;
        for folder in FOLDERS {
            let dir = data_dir.join(folder);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                // Skip half-written temporary files.
                if !path.is_file() || name.starts_with('.') {
                    continue;
                }
                match tar.append_path_with_name(&path, format!("{folder}/{name}")) {
                    Ok(()) => files += 1,
                    // Deleted since listing (a finished edit's upload): not part of the snapshot.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(BackupError::Io(format!("cannot add {}", path.display()), e));
                    }
                }
            }
        }
        let file = tar.into_inner().map_err(io("cannot finish the archive"))?;
        file.sync_all().map_err(io("cannot flush the archive"))?;
        Ok(files)
    })();
    let _ = std::fs::remove_file(&snapshot);
    let files = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, to).map_err(io(format!("cannot write {}", to.display())))?;
    let bytes = std::fs::metadata(to).map(|m| m.len()).unwrap_or(0);
    Ok(json!({
        "backup": to.display().to_string(),
        "bytes": bytes,
        "files": files,
        "users": store.users()?.len(),
        "jobs": store.all_jobs()?.len(),
    }))
}

/// Unpacks an archive into `data_dir`, which must not exist or be empty.
pub fn restore(from: &Path, data_dir: &Path) -> Result<Value, BackupError> {
    if data_dir.exists() {
        let mut entries = std::fs::read_dir(data_dir)
            .map_err(io(format!("cannot read {}", data_dir.display())))?;
        if entries.next().is_some() {
            return Err(BackupError::Invalid(format!(
                "{} is not empty; restore into an empty (or new) data folder",
                data_dir.display()
            )));
        }
    }
    crate::store::private_dir(data_dir)
        .map_err(io(format!("cannot create {}", data_dir.display())))?;
    let file = File::open(from).map_err(io(format!("cannot open {}", from.display())))?;
    let mut archive = tar::Archive::new(file);
    let mut restored = 0usize;
    let entries = archive.entries().map_err(io("not a Pictor backup"))?;
    for entry in entries {
        let mut entry = entry.map_err(io("the backup is damaged"))?;
        let path: PathBuf = entry
            .path()
            .map_err(io("the backup is damaged"))?
            .into_owned();
        let allowed = path == Path::new("pictor.redb")
            || path == Path::new("secret.key")
            || FOLDERS
                .iter()
                .any(|f| path.parent() == Some(Path::new(f)) && path.file_name().is_some());
        if !allowed {
            return Err(BackupError::Invalid(format!(
                "unexpected entry {} in the backup",
                path.display()
            )));
        }
        // `unpack_in` refuses paths that would leave the data folder.
        if !entry
            .unpack_in(data_dir)
            .map_err(io(format!("cannot restore {}", path.display())))?
        {
            return Err(BackupError::Invalid(format!(
                "unsafe entry {} in the backup",
                path.display()
            )));
        }
        restored += 1;
    }
    let db = data_dir.join("pictor.redb");
    if !db.exists() {
        return Err(BackupError::Invalid(
            "the archive has no pictor.redb: not a Pictor backup".into(),
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700));
        let key = data_dir.join("secret.key");
        if key.exists() {
            let _ = std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600));
        }
    }
    let store = Store::open(&db)?;
    Ok(json!({
        "restored": data_dir.display().to_string(),
        "files": restored,
        "users": store.users()?.len(),
        "jobs": store.all_jobs()?.len(),
    }))
}
