//! Closing a locker ([`Locker::close`](crate::Locker::close)): it refuses new calls, gives back
//! every lease it holds (locks, readers' shares, permits, leaderships), wakes the acquires
//! that wait so that they end with [`LockError::Closed`], and waits, up to a bound, for the
//! releases running in the background (dropped guards, abandoned attempts).
//!
//! An acquire whose call is in flight counts among the background work from before it checks
//! whether the locker closed until its answer is handled (its lease registered or given
//! back): `close` waits for it too, and reports drained only once nothing it sent can still
//! leave a lock behind.
//!
//! The locker keeps a weak list of the leases it granted, pruned as it grows (dead or
//! finished entries go), so that closing finds them without the guards' help; a guard whose
//! lease was given back by `close` says so: `is_held()` is false, `lost()` resolves, and its
//! `release()` is [`LockError::Lost`] with [`LostReason::Closed`](crate::LostReason::Closed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::lease::Lease;
use crate::engine::state::Inner;
use crate::error::LockError;
use crate::store::join_all;

/// How long [`Locker::close`](crate::Locker::close) waits, at most, for the releases it sends
/// and those running in the background.
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A locker's record of what closing it must reach.
#[derive(Default)]
pub(crate) struct Closing {
    closed: AtomicBool,
    /// Wakes the acquires that wait when the locker closes.
    woken: Notify,
    /// The leases granted, by id (weak: a lease lives as long as its guards).
    live: Mutex<Live>,
    /// Background jobs (releases of dropped guards, clean-ups of abandoned attempts) not
    /// finished yet, and their end.
    pending: AtomicUsize,
    idle: Notify,
}

#[derive(Default)]
struct Live {
    leases: HashMap<u64, Weak<Lease>>,
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
    async fn jobs_done(&self, until: Instant) -> bool {
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

/// What [`Locker::close`](crate::Locker::close) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloseReport {
    /// Leases it gave back (locks, readers' shares, permits, leaderships).
    pub released: usize,
    /// Of those, the ones the engine did not confirm in time (unavailable): they end when
    /// their lease runs out, or, on ZooKeeper and etcd, with the session.
    pub unconfirmed: usize,
    /// Whether every release running in the background ended within the bound.
    pub drained: bool,
}

impl Inner {
    /// Closes this locker (see the module docs), waiting at most `timeout`.
    pub(crate) async fn close(self: &Arc<Self>, timeout: Duration) -> CloseReport {
        let until = Instant::now() + timeout;
        let first = !self.closing.closed.swap(true, Ordering::SeqCst);
        self.closing.woken.notify_waiters();
        self.health.close();
        if first {
            tracing::info!("closing the locker: releasing every lease it holds");
        }
        let leases: Vec<Arc<Lease>> = {
            let mut live = self.closing.live.lock().unwrap();
            live.leases
                .drain()
                .filter_map(|(_, l)| l.upgrade())
                .filter(|l| !l.is_done())
                .collect()
        };
        // Each release runs as a task of its own: if this future is dropped, they go on.
        let releases: Vec<_> = leases
            .into_iter()
            .map(|lease| {
                let inner = self.clone();
                tokio::spawn(async move {
                    lease.close();
                    if !lease.finish() {
                        return Ok(false); // released meanwhile
                    }
                    inner.schedule.unwatch(&lease);
                    inner.queues.forfeit(&lease);
                    lease.end(&*inner.store).await.map(|_| true)
                })
            })
            .collect();
        let releases = releases.into_iter().map(|task| async move {
            match tokio::time::timeout_at(until, task).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(LockError::unavailable("the release task failed", None)),
                Err(_) => Err(LockError::unavailable(
                    "the release did not end in time",
                    None,
                )),
            }
        });
        let results = join_all(releases).await;
        let released = results.iter().filter(|r| !matches!(r, Ok(false))).count();
        let unconfirmed = results.iter().filter(|r| r.is_err()).count();
        for err in results.iter().filter_map(|r| r.as_ref().err()) {
            tracing::warn!(error = %err, "closing: a release was not confirmed; the lease runs out");
        }
        let drained = self.closing.jobs_done(until).await;
        CloseReport {
            released,
            unconfirmed,
            drained,
        }
    }
}
