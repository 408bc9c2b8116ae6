//! Combined writes: operations submitted by many threads at once run in one write transaction
//! and one commit, each still getting exactly its own result.
//!
//! The first submitter that finds no combiner at work becomes it: it waits for the writer's turn
//! and then takes every operation queued meanwhile (its own included), so the more the writer is
//! in demand, the more each transaction carries. If every operation succeeds the batch commits
//! once (one ticket for the group commit). If any operation fails, the whole transaction is
//! dropped (nothing of it was committed) and each operation runs again on its own, in the same
//! order, in its own transaction, exactly as it would have without combining; so a failing
//! operation never commits a partial write and never takes another one's change with it. That
//! is why an operation is a re-runnable `Fn`: redb cannot restore a savepoint once a table is
//! open, so a failed operation in the middle of a transaction cannot be undone in place.
//!
//! Why: a non-durable redb commit and the hand-over of the writer to the next thread cost more
//! than a job operation itself. `API_BENCH=store cargo bench --bench api` (32 threads, each
//! create → start → finish): 9,600 transactions became ≈600, 2,200–2,450 jobs/s became
//! 4,500–5,200 (README, Benchmarks).

use crate::lock;
use std::sync::{Arc, Condvar, Mutex};

use redb::WriteTransaction;

use super::{Store, StoreError};

/// The queue of operations waiting for a combiner.
#[derive(Default)]
pub(super) struct Combiner {
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Default)]
struct State {
    queue: Vec<Arc<dyn Pending>>,
    /// A thread is combining (waiting for the writer or running a batch).
    busy: bool,
    /// Batches committed, and operations they carried (for benchmarks and tests).
    batches: u64,
    operations: u64,
}

/// An operation with its result slot, type-erased for the queue.
trait Pending: Send + Sync {
    /// Runs the operation in `txn`, keeping its result; `false` if it failed.
    fn run(&self, txn: &WriteTransaction) -> bool;
    /// The transaction it ran in committed as commit number `seq`.
    fn committed(&self, seq: u64);
    /// It ran and failed: its own error is its result.
    fn refused(&self);
    /// The transaction could not be made or committed: `e` is its result.
    fn failed(&self, e: &StoreError);
    /// Its final result is in.
    fn is_final(&self) -> bool;
}

struct Op<T, E, F> {
    f: F,
    slot: Mutex<Slot<T, E>>,
}

enum Slot<T, E> {
    Waiting,
    /// Ran in the current transaction, not yet committed.
    Ran(Result<T, E>),
    Final(Result<(T, u64), E>),
    Taken,
}

impl<T, E, F> Pending for Op<T, E, F>
where
    T: Send,
    E: From<StoreError> + Send,
    F: Fn(&WriteTransaction) -> Result<T, E> + Send + Sync,
{
    fn run(&self, txn: &WriteTransaction) -> bool {
        // A panicking operation fails alone (its transaction is then dropped and the others
        // run again without it), instead of unwinding through the combiner's caller.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.f)(txn)))
            .unwrap_or_else(|_| {
                Err(E::from(StoreError::Task(
                    "a store operation panicked".into(),
                )))
            });
        let ok = result.is_ok();
        *lock(&self.slot) = Slot::Ran(result);
        ok
    }

    fn committed(&self, seq: u64) {
        let mut slot = lock(&self.slot);
        if let Slot::Ran(Ok(_)) = &*slot
            && let Slot::Ran(Ok(value)) = std::mem::replace(&mut *slot, Slot::Taken)
        {
            *slot = Slot::Final(Ok((value, seq)));
        }
    }

    fn refused(&self) {
        let mut slot = lock(&self.slot);
        if let Slot::Ran(Err(_)) = &*slot
            && let Slot::Ran(Err(e)) = std::mem::replace(&mut *slot, Slot::Taken)
        {
            *slot = Slot::Final(Err(e));
        }
    }

    fn failed(&self, e: &StoreError) {
        *lock(&self.slot) = Slot::Final(Err(E::from(e.clone())));
    }

    fn is_final(&self) -> bool {
        matches!(*lock(&self.slot), Slot::Final(_))
    }
}

impl Store {
    /// Runs `op` in a write transaction shared with the operations other threads submit at the
    /// same time, and returns its result with its commit's number, not yet durable (see
    /// [`Store::wait_durable`]). `op` may run twice: if any operation of its batch fails, each
    /// runs again alone; only the run whose transaction commits counts. An `Err` from `op` is
    /// never committed.
    pub(crate) fn write_combined<T, E, F>(&self, op: F) -> Result<(T, u64), E>
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
        F: Fn(&WriteTransaction) -> Result<T, E> + Send + Sync + 'static,
    {
        let mine = Arc::new(Op {
            f: op,
            slot: Mutex::new(Slot::Waiting),
        });
        let combiner = &self.group.combiner;
        {
            let mut st = lock(&combiner.state);
            st.queue.push(mine.clone());
            while !mine.is_final() && st.busy {
                st = combiner.done.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if !mine.is_final() {
                st.busy = true;
            }
        }
        if !mine.is_final() {
            // This thread combines: whatever happens below, the next one may then.
            let _busy = Busy(combiner);
            self.run_batch(combiner);
        }
        let result = std::mem::replace(&mut *lock(&mine.slot), Slot::Taken);
        match result {
            Slot::Final(result) => result,
            _ => Err(E::from(StoreError::Task(
                "a combined write ended without a result".into(),
            ))),
        }
    }

    /// Takes the writer, then every queued operation, and runs them (see the module docs).
    fn run_batch(&self, combiner: &Combiner) {
        let txn = self.begin_write();
        let batch = std::mem::take(&mut lock(&combiner.state).queue);
        if batch.is_empty() {
            return;
        }
        let txn = match txn {
            Ok(txn) => txn,
            Err(e) => {
                batch.iter().for_each(|op| op.failed(&e));
                return;
            }
        };
        if batch.iter().all(|op| op.run(&txn)) {
            match self.commit_deferred(txn) {
                Ok(seq) => batch.iter().for_each(|op| op.committed(seq)),
                Err(e) => batch.iter().for_each(|op| op.failed(&e)),
            }
            let mut st = lock(&combiner.state);
            st.batches += 1;
            st.operations += batch.len() as u64;
            return;
        }
        // One failed: nothing of this transaction is kept; each runs alone, in order.
        drop(txn);
        for op in &batch {
            let txn = match self.begin_write() {
                Ok(txn) => txn,
                Err(e) => {
                    op.failed(&e);
                    continue;
                }
            };
            if op.run(&txn) {
                match self.commit_deferred(txn) {
                    Ok(seq) => op.committed(seq),
                    Err(e) => op.failed(&e),
                }
            } else {
                drop(txn);
                op.refused();
            }
        }
        let mut st = lock(&combiner.state);
        st.batches += batch.len() as u64;
        st.operations += batch.len() as u64;
    }

    /// (transactions, operations) of combined writes so far.
    pub fn combined_counts(&self) -> (u64, u64) {
        let st = lock(&self.group.combiner.state);
        (st.batches, st.operations)
    }
}

/// Ends a combiner's turn: the next waiting submitter may combine; everyone rechecks. Runs on
/// unwinding too, so a panicking operation does not leave the others waiting forever (their
/// results are then "ended without a result" errors, or they combine again).
struct Busy<'a>(&'a Combiner);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.0.state);
        st.busy = false;
        drop(st);
        self.0.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::tables::META;

    /// Many threads' operations share transactions; each gets its own result; an operation
    /// that fails after writing commits nothing and takes no one else's write with it.
    #[test]
    fn combined_operations_keep_their_own_results() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("pictor.redb")).unwrap();
        let threads: Vec<_> = (0..16u64)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..40u64 {
                        // Every fifth operation writes, then refuses.
                        let refuse = (t * 40 + i) % 5 == 0;
                        let got = store.write_combined(move |txn| {
                            let n = crate::store::next_counter(txn, "combined")?;
                            if refuse {
                                return Err(StoreError::Conflict(format!("refused after {n}")));
                            }
                            Ok(n)
                        });
                        match got {
                            Ok((n, seq)) => {
                                store.wait_durable(seq).unwrap();
                                mine.push(n);
                            }
                            Err(StoreError::Conflict(_)) => assert!(refuse),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    mine
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        // 512 accepted operations, numbered 1..=512 without a gap: no refused write committed.
        assert_eq!(all, (1..=512).collect::<Vec<_>>());
        let read = store.begin_read().unwrap();
        let meta = read.open_table(META).unwrap();
        assert_eq!(meta.get("combined").unwrap().unwrap().value(), 512);
        let (transactions, operations) = store.combined_counts();
        assert_eq!(operations, 640);
        assert!(
            transactions < operations,
            "{transactions} transactions for {operations} operations: nothing was combined"
        );
    }
}
