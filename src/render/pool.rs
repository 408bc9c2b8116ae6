//! The bounded blocking pool: a semaphore in front of `spawn_blocking`. CPU-heavy work
//! (rendering, decoding) takes a permit first, so at most `size` such tasks run at once and the
//! async worker threads never do that work themselves.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Clone)]
pub struct RenderPool {
    permits: Arc<Semaphore>,
    size: usize,
    busy: Arc<AtomicUsize>,
}

/// A reserved slot in the pool.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("the task panicked or was cancelled: {0}")]
    Join(String),
    #[error("the pool is closed")]
    Closed,
}

impl RenderPool {
    pub fn new(size: usize) -> RenderPool {
        let size = size.max(1);
        RenderPool {
            permits: Arc::new(Semaphore::new(size)),
            size,
            busy: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Tasks running right now.
    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::Relaxed)
    }

    /// Waits (fairly, first come first served) for a free slot.
    pub async fn acquire(&self) -> Result<Slot, PoolError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PoolError::Closed)?;
        Ok(Slot { _permit: permit })
    }

    /// Runs `f` on a blocking thread while holding `slot`. A panic in `f` becomes an error.
    pub async fn run<T, F>(&self, slot: Slot, f: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let busy = self.busy.clone();
        busy.fetch_add(1, Ordering::Relaxed);
        let result = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            f()
        })
        .await;
        busy.fetch_sub(1, Ordering::Relaxed);
        result.map_err(|e| PoolError::Join(e.to_string()))
    }

    /// Acquires a slot and runs `f`.
    pub async fn spawn<T, F>(&self, f: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slot = self.acquire().await?;
        self.run(slot, f).await
    }
}
