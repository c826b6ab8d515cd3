//! What a locker keeps for its closing ([`crate::kernel::close`]): whether it closed, the
//! leases it granted, the background jobs not finished yet.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::LockError;
use crate::kernel::lease::Lease;

/// A locker's record of what closing it must reach.
#[derive(Default)]
pub(crate) struct Closing {
    pub(super) closed: AtomicBool,
    /// Wakes the acquires that wait when the locker closes.
    pub(super) woken: Notify,
    /// The leases granted, by id (weak: a lease lives as long as its guards).
    pub(super) live: Mutex<Live>,
    /// Background jobs (releases of dropped guards, clean-ups of abandoned attempts) not
    /// finished yet, and their end.
    pending: AtomicUsize,
    idle: Notify,
}

#[derive(Default)]
pub(super) struct Live {
    pub(super) leases: HashMap<u64, Weak<Lease>>,
    /// The list is pruned when it reaches this size, which then doubles from what is left.
    prune_at: usize,
}

impl Closing {
    /// Whether the locker was closed.
    pub(crate) fn is_closed(&self) -> bool {
        // Sequentially consistent with the count of jobs: an attempt counts itself, then
        // reads this; `close` sets this, then reads the count. One sees the other.
        self.closed.load(Ordering::SeqCst)
    }

    /// `Err(Closed)` once the locker was closed: checked where every request's options are
    /// resolved, and again by the acquires that wait.
    pub(crate) fn check(&self) -> Result<(), LockError> {
        match self.is_closed() {
            true => Err(LockError::Closed),
            false => Ok(()),
        }
    }

    /// Resolves once the locker is closed (at once if it is).
    pub(crate) async fn closed(&self) {
        let woken = self.woken.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if self.is_closed() {
            return;
        }
        woken.await;
    }

    /// Records a lease this locker granted (or handed to another holder).
    pub(crate) fn register(&self, lease: &Arc<Lease>) {
        let mut live = self.live.lock().unwrap();
        live.leases.insert(lease.id, Arc::downgrade(lease));
        if live.leases.len() >= live.prune_at.max(64) {
            live.leases
                .retain(|_, l| l.upgrade().is_some_and(|l| !l.is_done()));
            live.prune_at = live.leases.len() * 2;
        }
    }

    /// A background job starts: [`Pending`] counts it until it is dropped.
    pub(crate) fn job_started(self: &Arc<Self>) -> Pending {
        self.pending.fetch_add(1, Ordering::SeqCst);
        Pending(self.clone())
    }

    /// Waits until no background job is left, or `until`; true when none is.
    pub(super) async fn jobs_done(&self, until: Instant) -> bool {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::timeout_at(until, idle).await.is_err() {
                return self.pending.load(Ordering::SeqCst) == 0;
            }
        }
    }
}

/// One background job in flight; its drop (the job finished, or was dropped unfinished)
/// counts it out.
pub(crate) struct Pending(Arc<Closing>);

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}
