//! One flush for many waiters: each change takes a ticket after it is made; the first waiter
//! whose ticket is not yet covered runs the flush for every ticket taken so far, the others wait
//! for it, and those who arrive while it runs share the next one. The store's group commit
//! (one fsync for the transactions committed meanwhile) and the picture folder's fsync use it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

#[derive(Default)]
pub struct GroupSync {
    /// Tickets taken, numbered from 1.
    taken: AtomicU64,
    /// The last ticket covered, for async waiters that wait without flushing
    /// ([`GroupSync::covered_watch`]).
    covered_tx: tokio::sync::watch::Sender<u64>,
    /// Flushes run.
    flushes: AtomicU64,
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Default)]
struct State {
    /// Every ticket up to here is covered by a flush that succeeded.
    covered: u64,
    /// A flush is running.
    running: bool,
    /// The last failed flush: the tickets it was to cover, and why.
    failed: Option<(u64, String)>,
}

impl GroupSync {
    /// A ticket for a change made before this call.
    pub fn ticket(&self) -> u64 {
        self.taken.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Follows the last ticket covered: for waiters that let others' flushes cover them.
    pub fn covered_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.covered_tx.subscribe()
    }

    /// (flushes run, tickets taken).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.flushes.load(Ordering::Relaxed),
            self.taken.load(Ordering::Relaxed),
        )
    }

    /// Returns once a flush that began after ticket `seq` was taken has succeeded, running
    /// `flush` itself when none is running; the error of the flush that was to cover it
    /// otherwise. `flush` runs at most once, outside the lock. It covers the tickets taken
    /// before it was called, or, if it calls [`Cover::from_here`], those taken before that call
    /// (a flush that first waits its turn covers the changes made while it waited).
    pub fn wait(
        &self,
        seq: u64,
        flush: impl FnOnce(&Cover<'_>) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut flush = Some(flush);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if st.covered >= seq {
                return Ok(());
            }
            if let Some((upto, why)) = &st.failed
                && *upto >= seq
            {
                return Err(why.clone());
            }
            let Some(run) = (!st.running).then(|| flush.take()).flatten() else {
                st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            st.running = true;
            drop(st);
            // Every ticket taken so far was taken after its change, so the flush covers it.
            let cover = Cover {
                sync: self,
                target: Cell::new(self.taken.load(Ordering::SeqCst)),
            };
            let result = run(&cover);
            let target = cover.target.get();
            self.flushes.fetch_add(1, Ordering::Relaxed);
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.running = false;
            match result {
                Ok(()) => {
                    st.covered = st.covered.max(target);
                    self.covered_tx.send_replace(st.covered);
                }
                Err(e) => st.failed = Some((target, e)),
            }
            self.done.notify_all();
        }
    }
}

/// What a running flush covers (see [`GroupSync::wait`]).
pub struct Cover<'a> {
    sync: &'a GroupSync,
    target: Cell<u64>,
}

impl Cover<'_> {
    /// The flush persists every change made before this call: it covers the tickets taken so
    /// far (each was taken after its change), not only those taken before it began.
    pub fn from_here(&self) {
        self.target.set(self.sync.taken.load(Ordering::SeqCst));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Many waiters at once share flushes, and each hears of the one that covers it.
    #[test]
    fn waiters_share_flushes_and_hear_failures() {
        let g = Arc::new(GroupSync::default());
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let t = g.ticket();
                        g.wait(t, |_| {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                            Ok(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (flushes, taken) = g.counts();
        assert_eq!(taken, 800);
        assert!(flushes < taken, "{flushes} flushes for {taken} tickets");
        let t = g.ticket();
        assert_eq!(
            g.wait(t, |_| Err("disk full".into())),
            Err("disk full".into())
        );
        assert_eq!(
            g.wait(t, |_| Ok(())),
            Err("disk full".into()),
            "not covered later"
        );
    }
}
