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

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::LockError;
use crate::kernel::closing::Closing;
use crate::kernel::health::Calls;
use crate::kernel::health::Health;
use crate::kernel::lease::Lease;
use crate::kernel::queue::Queues;
use crate::kernel::watchdog::Schedule;
use crate::store::join_all;

/// How long [`Locker::close`](crate::Locker::close) waits, at most, for the releases it sends
/// and those running in the background.
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Closes a locker (see the module docs), waiting at most `timeout`: marks `closing`
/// closed and wakes its waiters, closes its `health`, and gives back in `store` every lease
/// `closing` registered that is not given back yet (each one off the renewal `schedule` and
/// out of the local `queues` first).
pub(crate) async fn close(
    closing: &Closing,
    health: &Health,
    store: &Arc<Calls>,
    queues: &Arc<Queues>,
    schedule: &Arc<Schedule>,
    timeout: Duration,
) -> CloseReport {
    let until = Instant::now() + timeout;
    let first = !closing.closed.swap(true, Ordering::SeqCst);
    closing.woken.notify_waiters();
    health.close();
    if first {
        tracing::info!("closing the locker: releasing every lease it holds");
    }
    let leases: Vec<Arc<Lease>> = {
        let mut live = closing.live.lock().unwrap();
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
            let (store, queues, schedule) = (store.clone(), queues.clone(), schedule.clone());
            tokio::spawn(async move {
                lease.close();
                if !schedule.ends(&lease) {
                    return Ok(false); // released meanwhile
                }
                queues.forfeit(&lease);
                lease.give_back(&store).await.map(|_| true)
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
    let drained = closing.jobs_done(until).await;
    CloseReport {
        released,
        unconfirmed,
        drained,
    }
}
