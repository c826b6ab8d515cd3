//! The in-process election users write with tokio alone: one `tokio::sync::Mutex` (fair: its
//! waiters are served in order) whose holder leads, and a `watch` channel of the leader's
//! term for observers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{watch, Mutex, OwnedMutexGuard};

use crate::scenarios::leader::handover::Election;

/// Its name in the report.
pub(crate) const TOKIO_ELECTION: &str = "tokio::sync::Mutex + watch channel of the term";

/// One election in this process.
pub(crate) struct TokioElection {
    lock: Arc<Mutex<()>>,
    terms: AtomicU64,
    leader: watch::Sender<u64>,
}

impl TokioElection {
    /// A fresh election (the name only tells windows apart, as the store's names do).
    pub(crate) fn new(_name: String) -> TokioElection {
        TokioElection {
            lock: Arc::new(Mutex::new(())),
            terms: AtomicU64::new(0),
            leader: watch::Sender::new(0),
        }
    }
}

impl Election for TokioElection {
    type Candidate = ();
    type Leadership = OwnedMutexGuard<()>;
    type Observer = watch::Receiver<u64>;

    async fn candidate(&self) {}

    async fn campaign<'a>(&'a self, _: &'a (), _: &'a str) -> (OwnedMutexGuard<()>, u64) {
        let guard = self.lock.clone().lock_owned().await;
        let term = self.terms.fetch_add(1, Ordering::Relaxed) + 1;
        self.leader.send_replace(term);
        (guard, term)
    }

    async fn resign<'a>(&'a self, _: &'a (), guard: OwnedMutexGuard<()>) {
        self.leader.send_replace(0);
        drop(guard);
    }

    /// No session in one process: the guard dropped.
    async fn end_session(&self, _: (), guard: OwnedMutexGuard<()>) {
        drop(guard);
    }

    async fn observer(&self) -> watch::Receiver<u64> {
        self.leader.subscribe()
    }

    async fn next_leader<'a>(&'a self, observer: &'a mut watch::Receiver<u64>, last: u64) -> u64 {
        loop {
            let term = *observer.borrow_and_update();
            if term != 0 && term != last {
                return term;
            }
            observer.changed().await.expect("the election lives");
        }
    }
}
