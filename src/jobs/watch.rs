//! Per-job wake-ups for long-polls. A waiter subscribes *before* reading the job from the store;
//! the engine fires the job's channel *after* the finishing transaction commits. Either the
//! waiter sees the final state on its read, or it is subscribed when the signal fires.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::store::JobId;

#[derive(Clone, Default)]
pub struct JobWatchers {
    inner: Arc<Mutex<HashMap<JobId, watch::Sender<bool>>>>,
}

/// A subscription; dropping it removes the channel once nobody listens.
pub struct Subscription {
    id: JobId,
    rx: Option<watch::Receiver<bool>>,
    watchers: JobWatchers,
}

impl JobWatchers {
    pub fn subscribe(&self, id: JobId) -> Subscription {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let tx = map.entry(id).or_insert_with(|| watch::channel(false).0);
        Subscription {
            id,
            rx: Some(tx.subscribe()),
            watchers: self.clone(),
        }
    }

    /// Wakes everyone waiting on `id`. Call after the finishing transaction has committed.
    pub fn finished(&self, id: JobId) {
        let tx = self
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(tx) = tx {
            let _ = tx.send(true);
        }
    }

    /// Channels currently held (for tests and metrics).
    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Subscription {
    /// Resolves when the job is finished (or immediately if it already was signalled).
    pub async fn finished(&mut self) {
        if let Some(rx) = self.rx.as_mut() {
            let _ = rx.wait_for(|done| *done).await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self
            .watchers
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        drop(self.rx.take());
        if let Some(tx) = map.get(&self.id)
            && tx.receiver_count() == 0
        {
            map.remove(&self.id);
        }
    }
}
