//! Per-job wake-ups for long-polls. A waiter subscribes *before* reading the job from the store;
//! the engine fires the job's channel *after* the finishing transaction commits. Either the
//! waiter sees the final state on its read, or it is subscribed when the signal fires.
//!
//! Besides the finish, a channel carries changes worth showing while the job is unfinished: its
//! render progress advanced, or its place in the queue moved (`wait_for=progress`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::store::JobId;

#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Signal {
    /// Bumped by every change.
    version: u64,
    finished: bool,
}

#[derive(Clone, Default)]
pub struct JobWatchers {
    inner: Arc<Mutex<HashMap<JobId, watch::Sender<Signal>>>>,
}

/// A subscription; dropping it removes the channel once nobody listens.
pub struct Subscription {
    id: JobId,
    rx: Option<watch::Receiver<Signal>>,
    /// The channel's version when subscribed.
    start: u64,
    watchers: JobWatchers,
}

impl JobWatchers {
    pub fn subscribe(&self, id: JobId) -> Subscription {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let tx = map
            .entry(id)
            .or_insert_with(|| watch::channel(Signal::default()).0);
        Subscription {
            id,
            rx: Some(tx.subscribe()),
            start: tx.borrow().version,
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
            tx.send_modify(|s| {
                s.version += 1;
                s.finished = true;
            });
        }
    }

    /// Wakes those waiting for any change of `id` (progress, queue position). Nothing happens
    /// when nobody listens.
    pub fn changed(&self, id: JobId) {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = map.get(&id) {
            tx.send_modify(|s| s.version += 1);
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
            let _ = rx.wait_for(|s| s.finished).await;
        }
    }

    /// Resolves at the first change after the subscription or the previous call (at once if
    /// one came since). `true` when the job's task has ended: no change will follow.
    pub async fn changed(&mut self) -> bool {
        let start = self.start;
        let Some(rx) = self.rx.as_mut() else {
            return true;
        };
        match rx.wait_for(|s| s.version > start || s.finished).await {
            Ok(now) => {
                self.start = now.version;
                now.finished
            }
            Err(_) => true,
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
