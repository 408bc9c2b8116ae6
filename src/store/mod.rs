//! The embedded store: one redb file holding users, API keys, the credit ledger, jobs and
//! settings. Only this module names redb.
//!
//! Every business operation is one write transaction (`begin_write … commit`). Methods are
//! synchronous; async callers go through [`Store::call`], which runs them on the blocking pool.
//!
//! **Group commit.** Each operation commits its own transaction without waiting for the disk
//! (redb `Durability::None`), then waits in [`GroupCommit`] until a durable commit covers it:
//! the first waiter makes one empty `Durability::Immediate` commit (one fsync), which persists
//! every transaction committed before it, and wakes all of them. Operations that arrive while
//! that fsync runs queue for the writer, commit in memory one after another, and share the next
//! fsync. The writer is taken in arrival order (a fair turn in front of redb's own lock, which
//! lets the thread that just committed take it again at once): so the next flush queues behind
//! every operation already waiting and covers them all, instead of overtaking them with one
//! commit each. So each caller still has its own transaction (its own success or
//! failure, compare-and-set and ledger row inside it), nothing returns before it is durable,
//! and a crash loses only transactions nobody was told about.
//!
//! **Combined writes.** The job engine's operations go through [`combine`]: those that arrive
//! while the writer is busy share one transaction, each with its own result; if one fails, the
//! transaction is dropped and each runs again alone (a non-durable commit and the writer's
//! hand-over cost more than such an operation: 32 writers of create → start → finish made
//! 9,600 transactions, now ≈600). Why not a savepoint per operation: redb creates savepoints
//! only in a transaction that has written nothing, so a failing operation cannot be undone in
//! the middle of a shared one.
//!
//! **Reads see only what is durable.** Each flush takes a read transaction while it holds the
//! writer, i.e. exactly the state its fsync persists, and publishes it once the fsync succeeded;
//! every read outside a write transaction uses the latest published one. So no request shows
//! data that a crash could still take back, a caller reads its own write as soon as it is told
//! of it, and when a flush fails (a full disk) the commits it was to cover stay invisible (redb
//! then refuses further writes until the server restarts and the file is repaired to its last
//! durable state, which is what the reads showed all along).

pub mod audit;
mod codec;
mod combine;
pub mod erase;
pub mod group;
pub mod jobs;
pub mod keys;
pub mod ledger;
mod migrate;
pub mod models;
pub mod oauth;
pub mod recovery;
pub mod sessions;
pub mod settings;
pub mod tables;
pub mod users;
pub mod webhooks;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, WriteTransaction,
};

pub use jobs::{
    CancelOutcome, CreateJobError, FailCode, FinishOutcome, JobId, JobKind, JobModel, JobRecord,
    JobScene, JobStatus, NewJob, StartOutcome,
};
pub use ledger::{LedgerEntry, LedgerReason};
pub use settings::Settings;
pub use users::{KeyMeta, NamedKey, NewUser, UserId, UserPatch, UserRecord};
pub use webhooks::{Webhook, WebhookStatus};

#[derive(Debug, Clone, thiserror::Error)]
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
    redb::SetDurabilityError,
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

/// redb's page cache (its default is 1 GiB).
const CACHE_BYTES: usize = 8 << 20;

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    /// The store file's path (its folder is the data folder: pictures, uploads, avatars).
    path: Arc<std::path::PathBuf>,
    group: Arc<GroupCommit>,
    /// Bumped after every commit that may change the signing keys, so the identity provider
    /// rebuilds its parsed key and JWKS only then.
    key_changes: Arc<AtomicU64>,
}

/// Shares one fsync among the transactions committed while the previous one ran, and keeps the
/// durable state for readers (see the module documentation).
pub struct GroupCommit {
    /// The state as of the last durable commit.
    view: RwLock<Arc<ReadTransaction>>,
    /// The writer's turn, taken before redb's own writer lock and handed on in arrival order
    /// (`unlock_fair`). redb's lock lets a thread that just committed take the writer again at
    /// once; a caller whose flush followed its own commit did, and covered only its own
    /// transaction (9,300 fsyncs for 9,600 commits with 32 writers). In arrival order, a flush
    /// runs after every writer that queued before it, and covers them all.
    turn: Arc<parking_lot::Mutex<()>>,
    /// One ticket per non-durable commit; a durable commit covers the tickets taken before it.
    /// A failed one stays failed: redb refuses further writes after a failed durable commit, so
    /// no later flush makes those commits durable behind the callers' backs.
    sync: group::GroupSync,
    /// Write operations waiting to share a transaction (see [`combine`]).
    combiner: combine::Combiner,
}

impl GroupCommit {
    fn new(db: &Database) -> Result<GroupCommit, StoreError> {
        Ok(GroupCommit {
            view: RwLock::new(Arc::new(db.begin_read()?)),
            sync: group::GroupSync::default(),
            turn: Arc::default(),
            combiner: combine::Combiner::default(),
        })
    }

    fn view(&self) -> Arc<ReadTransaction> {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Returns once commit number `seq` is durable, making the durable commit itself if no one
    /// else is; a successful one publishes the state it persisted for readers.
    fn wait(&self, seq: u64, db: &Database) -> Result<(), StoreError> {
        self.sync
            .wait(seq, |cover| {
                let view = flush(db, self.turn.lock_arc(), cover).map_err(|e| e.to_string())?;
                *self.view.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
                Ok(())
            })
            .map_err(StoreError::Db)
    }
}

/// One empty durable commit: its fsync persists every non-durable commit before it, including
/// those made while it waited for the writer (they are in its cover). Returns the state it
/// persisted, read while it held the writer.
fn flush(
    db: &Database,
    turn: Turn,
    cover: &group::Cover<'_>,
) -> Result<ReadTransaction, StoreError> {
    let mut txn = db.begin_write()?;
    // Holding the writer: no commit is in progress, and every ticket taken so far belongs to a
    // commit made before this point (a ticket is taken before its writer hands on the turn).
    cover.from_here();
    let view = db.begin_read()?;
    txn.set_durability(Durability::Immediate)?;
    txn.commit()?;
    Turn::unlock_fair(turn);
    Ok(view)
}

/// The writer's turn (see [`GroupCommit::turn`]).
type Turn = parking_lot::ArcMutexGuard<parking_lot::RawMutex, ()>;

/// A write transaction holding the writer's turn; dereferences to redb's transaction.
/// Dropped without a commit, the transaction aborts and then the turn goes to the next writer.
pub(crate) struct WriteTxn {
    // Field order matters: the transaction ends (and releases redb's writer) before the turn.
    txn: WriteTransaction,
    turn: Turn,
}

impl std::ops::Deref for WriteTxn {
    type Target = WriteTransaction;
    fn deref(&self) -> &WriteTransaction {
        &self.txn
    }
}

impl Store {
    /// Opens (or creates) the store file, creating tables and default settings on first use.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        // The file holds password hashes and sealed keys: created owner-only, never widened.
        private_file(path)
            .map_err(|e| StoreError::Db(format!("cannot create {}: {e}", path.display())))?;
        // redb caches up to 1 GiB of pages by default, and a busy server's RSS grows towards
        // it; a Pictor store is small (pictures are files), and what is not cached is read from
        // the OS page cache. 8 MiB bounds the process without slowing the hot tables (the
        // peer benchmark's ~60,000 token rows: peak RSS 56 MB with 16 MiB, 45 MB with 8, the
        // flow and refresh rates within the run-to-run spread).
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)?;
        migrate::run(&db)?;
        let group = Arc::new(GroupCommit::new(&db)?);
        let store = Store {
            db: Arc::new(db),
            path: Arc::new(path.to_path_buf()),
            group,
            key_changes: Arc::default(),
        };
        Ok(store)
    }

    /// The data folder the store file lives in.
    pub fn folder(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
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

    /// A read of the durable state (what the last durable commit persisted).
    pub(crate) fn begin_read(&self) -> Result<Arc<ReadTransaction>, StoreError> {
        Ok(self.group.view())
    }

    /// A write transaction whose commit goes through [`Store::commit`].
    pub(crate) fn begin_write(&self) -> Result<WriteTxn, StoreError> {
        let turn = self.group.turn.lock_arc();
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::None)?;
        Ok(WriteTxn { txn, turn })
    }

    /// Commits `txn` and returns once it is durable (group commit: one fsync for every
    /// transaction committed meanwhile).
    pub(crate) fn commit(&self, txn: WriteTxn) -> Result<(), StoreError> {
        let seq = self.commit_deferred(txn)?;
        self.group.wait(seq, &self.db)
    }

    /// Commits `txn` without waiting for the disk; returns its number for
    /// [`Store::wait_durable`]. Only for changes nobody is told of until a later durable commit.
    pub(crate) fn commit_deferred(&self, txn: WriteTxn) -> Result<u64, StoreError> {
        let WriteTxn { txn, turn } = txn;
        txn.commit()?;
        // The ticket is taken before the turn is handed on, so a flush that gets the turn next
        // counts this commit (see `flush`).
        let seq = self.group.sync.ticket();
        Turn::unlock_fair(turn);
        Ok(seq)
    }

    /// Returns once commit number `seq` (from a deferred commit) is durable.
    pub fn wait_durable(&self, seq: u64) -> Result<(), StoreError> {
        self.group.wait(seq, &self.db)
    }

    /// Returns once commit number `seq` is durable, like [`Store::wait_durable`], but first lets
    /// the flushes others make anyway cover it, for up to `patience`; only then does it flush.
    /// For changes nobody waits on (a job's start): when jobs come and go quickly their
    /// finishes' flushes cover it and no thread is taken, and a long render's start still
    /// becomes visible within `patience`.
    pub async fn durable_soon(&self, seq: u64, patience: Duration) -> Result<(), StoreError> {
        let mut covered = self.group.sync.covered_watch();
        let passive = matches!(
            tokio::time::timeout(patience, covered.wait_for(|c| *c >= seq)).await,
            Ok(Ok(_))
        );
        if passive {
            return Ok(());
        }
        self.call(move |s| s.wait_durable(seq)).await
    }

    /// Changes with every commit that may have changed the signing keys (in this process).
    pub fn key_generation(&self) -> u64 {
        self.key_changes.load(Ordering::SeqCst)
    }

    pub(crate) fn keys_changed(&self) {
        self.key_changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Durable commits (fsyncs) made so far, and the transactions they covered.
    pub fn commit_counts(&self) -> (u64, u64) {
        self.group.sync.counts()
    }

    /// Writes a consistent copy of the whole store, as of one read transaction, to a new file.
    /// Runs while the server serves: writers are not blocked.
    pub fn snapshot_to(&self, path: &Path) -> Result<(), StoreError> {
        new_private_file(path)
            .map_err(|e| StoreError::Db(format!("cannot create {}: {e}", path.display())))?;
        let src = self.begin_read()?;
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

/// `now` for the times a transaction writes on jobs, kept in commit order: a caller reads the
/// clock before it waits for the writer, so a later commit can carry an earlier reading. A
/// reading up to 5 s behind the last stamp is moved up to it; a clock set back by more (by the
/// operator, or a test) is believed.
pub(crate) fn ordered_stamp(
    txn: &redb::WriteTransaction,
    now: crate::clock::Millis,
) -> Result<crate::clock::Millis, StoreError> {
    const SLACK_MS: u64 = 5_000;
    let mut meta = txn.open_table(tables::META)?;
    let last = meta.get("job_stamp")?.map(|v| v.value()).unwrap_or(0);
    let now = if now < last && last - now <= SLACK_MS {
        last
    } else {
        now
    };
    meta.insert("job_stamp", now)?;
    Ok(now)
}
