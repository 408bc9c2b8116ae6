//! The embedded store: one redb file holding users, API keys, the credit ledger, jobs and
//! settings. Only this module names redb.
//!
//! Every business operation is one write transaction (`begin_write … commit`). Methods are
//! synchronous; async callers go through [`Store::call`], which runs them on the blocking pool.

mod codec;
pub mod jobs;
pub mod ledger;
mod migrate;
pub mod models;
pub mod oauth;
pub mod sessions;
pub mod settings;
pub mod tables;
pub mod users;
pub mod webhooks;

use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable};

pub use jobs::{
    CancelOutcome, CreateJobError, FailCode, FinishOutcome, JobId, JobKind, JobModel, JobRecord,
    JobScene, JobStatus, NewJob, StartOutcome,
};
pub use ledger::{LedgerEntry, LedgerReason};
pub use settings::Settings;
pub use users::{NewUser, UserId, UserPatch, UserRecord};
pub use webhooks::{Webhook, WebhookStatus};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process (normally the running server) has the file open.
    #[error("the database is in use by another process (is the server running?)")]
    AlreadyOpen,
    #[error("database error: {0}")]
    Db(String),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    #[error("store task failed: {0}")]
    Task(String),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Db(e.to_string())
            }
        }
    )*};
}
from_redb!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

impl From<redb::DatabaseError> for StoreError {
    fn from(e: redb::DatabaseError) -> Self {
        match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::AlreadyOpen,
            other => StoreError::Db(other.to_string()),
        }
    }
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
}

impl Store {
    /// Opens (or creates) the store file, creating tables and default settings on first use.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        // The file holds password hashes and sealed keys: created owner-only, never widened.
        private_file(path)
            .map_err(|e| StoreError::Db(format!("cannot create {}: {e}", path.display())))?;
        let db = Database::create(path)?;
        let store = Store { db: Arc::new(db) };
        migrate::run(&store.db)?;
        Ok(store)
    }

    /// Runs a synchronous store operation on the blocking pool.
    pub async fn call<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: FnOnce(&Store) -> Result<T, E> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| E::from(StoreError::Task(e.to_string())))?
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// Writes a consistent copy of the whole store, as of one read transaction, to a new file.
    /// Runs while the server serves: writers are not blocked.
    pub fn snapshot_to(&self, path: &Path) -> Result<(), StoreError> {
        new_private_file(path)
            .map_err(|e| StoreError::Db(format!("cannot create {}: {e}", path.display())))?;
        let src = self.db.begin_read()?;
        let copy = Database::create(path)?;
        let dst = copy.begin_write()?;
        tables::copy_all(&src, &dst)?;
        dst.commit()?;
        Ok(())
    }

    /// Whether the file is in a state redb can read (used after restores and by tests).
    pub fn readable(&self) -> bool {
        self.db.begin_read().is_ok()
    }
}

/// Creates `path` empty and owner-only (0600) if it does not exist; an existing file is left as is.
pub fn private_file(path: &Path) -> std::io::Result<()> {
    match new_private_file(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Creates a new owner-only (0600) file; fails if `path` exists (no following a planted link).
pub fn new_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Creates a folder (and its parents) and makes it owner-only (0700).
pub fn private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Takes and increments a named counter in `META` inside a write transaction.
pub(crate) fn next_counter(txn: &redb::WriteTransaction, name: &str) -> Result<u64, StoreError> {
    let mut meta = txn.open_table(tables::META)?;
    let next = meta.get(name)?.map(|v| v.value()).unwrap_or(0) + 1;
    meta.insert(name, next)?;
    Ok(next)
}
