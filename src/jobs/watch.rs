//! Per-job wake-ups for long-polls. A waiter subscribes *before* reading the job from the store;
//! the engine fires the job's channel *after* the finishing transaction commits. Either the
//! waiter sees the final state on its read, or it is subscribed when the signal fires.
//!
//! Besides the finish, a channel carries changes worth showing while the job is unfinished: its
//! render progress advanced, or its place in the queue moved (`wait_for=progress`). Those who
//! wait for the finish only listen on a channel of their own: a job moving up the queue wakes
//! every queued job's progress watchers, and would otherwise wake each of their long-polls too.

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

/// One job's channels: every change, and the finish alone.
struct Channels {
    changes: watch::Sender<Signal>,
    finished: watch::Sender<bool>,
}

impl Channels {
    fn listeners(&self) -> usize {
        self.changes.receiver_count() + self.finished.receiver_count()
    }
}

#[derive(Clone, Default)]
pub struct JobWatchers {
    inner: Arc<Mutex<HashMap<JobId, Channels>>>,
}

/// A subscription; dropping it removes the channels once nobody listens.
pub struct Subscription {
    id: JobId,
    rx: Option<Listen>,
    /// The channel's version when subscribed.
    start: u64,
    watchers: JobWatchers,
}

impl JobWatchers {
    /// Subscribes to the job's finish only (see [`Subscription::finished`]).
    pub fn subscribe_finish(&self, id: JobId) -> Subscription {
        self.subscribe_to(id, false)
    }

    /// Subscribes to every change of the job (see [`Subscription::changed`]).
    pub fn subscribe(&self, id: JobId) -> Subscription {
        self.subscribe_to(id, true)
    }

    fn subscribe_to(&self, id: JobId, changes: bool) -> Subscription {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let ch = map.entry(id).or_insert_with(|| Channels {
            changes: watch::channel(Signal::default()).0,
            finished: watch::channel(false).0,
        });
        let rx = if changes {
            Listen::Changes(ch.changes.subscribe())
        } else {
            Listen::Finish(ch.finished.subscribe())
        };
        Subscription {
            id,
            rx: Some(rx),
            start: ch.changes.borrow().version,
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
        if let Some(ch) = tx {
            ch.changes.send_modify(|s| {
                s.version += 1;
                s.finished = true;
            });
            ch.finished.send_replace(true);
        }
    }

    /// Wakes those waiting for any change of `id` (progress, queue position). Nothing happens
    /// when nobody listens.
    pub fn changed(&self, id: JobId) {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(ch) = map.get(&id) {
            ch.changes.send_modify(|s| s.version += 1);
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

/// What a subscription listens to.
enum Listen {
    Changes(watch::Receiver<Signal>),
    Finish(watch::Receiver<bool>),
}

impl Subscription {
    /// Resolves when the job is finished (or immediately if it already was signalled).
    pub async fn finished(&mut self) {
        match self.rx.as_mut() {
            Some(Listen::Finish(rx)) => drop(rx.wait_for(|f| *f).await),
            Some(Listen::Changes(rx)) => drop(rx.wait_for(|s| s.finished).await),
            None => {}
        }
    }

    /// Resolves at the first change after the subscription or the previous call (at once if
    /// one came since). `true` when the job's task has ended: no change will follow.
    pub async fn changed(&mut self) -> bool {
        let start = self.start;
        let rx = match self.rx.as_mut() {
            Some(Listen::Changes(rx)) => rx,
            // Subscribed to the finish only: that is the one change it hears of.
            Some(Listen::Finish(_)) => {
                self.finished().await;
                return true;
            }
            None => return true,
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
        if let Some(ch) = map.get(&self.id)
            && ch.listeners() == 0
        {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job moving in the queue wakes those who watch its changes, not those who wait for its
    /// finish; the finish wakes both, and the channels go with the last listener.
    #[tokio::test]
    async fn finish_waiters_sleep_through_changes() {
        let w = JobWatchers::default();
        let id = JobId(7);
        let mut finish = w.subscribe_finish(id);
        let mut every = w.subscribe(id);
        w.changed(id);
        w.changed(id);
        match &finish.rx {
            Some(Listen::Finish(rx)) => assert!(!rx.has_changed().unwrap(), "woken by a change"),
            _ => panic!("a finish subscription listens to the finish"),
        }
        assert!(!every.changed().await, "a change, not the end");
        w.finished(id);
        finish.finished().await;
        assert!(every.changed().await, "the end");
        drop((finish, every));
        assert!(w.is_empty());
    }
}
