//! What the checks share: the time bounds that tell a release from an expiry, and small
//! helpers.

use std::future::Future;
use std::time::Duration;

use leasehold::Locker;
use tokio::time::{timeout, Instant};

/// Added to every time bound, for a loaded 2-core CI machine.
pub const SLACK: Duration = Duration::from_secs(2);

/// A lease that no check here outlasts: a lock that comes free within [`HANDOVER`] was
/// released, it did not expire.
pub const LONG_LEASE: Duration = Duration::from_secs(10);

/// How soon a released lock reaches the next owner: a fifth of [`LONG_LEASE`]. A handover
/// takes milliseconds; the bound only has to tell it from the lease's expiry.
pub const HANDOVER: Duration = Duration::from_secs(2);

/// How long a contender waits for a lock that should come free by a release: shorter than
/// [`LONG_LEASE`], so that a lock left to expire makes it fail with `Busy`.
pub const CONTENDER_WAIT: Duration = Duration::from_secs(6);

/// Awaits `call`, failing the test if it takes longer than `bound`.
pub async fn bounded<T>(what: &str, bound: Duration, call: impl Future<Output = T>) -> T {
    timeout(bound, call)
        .await
        .unwrap_or_else(|_| panic!("{what} did not return within {bound:?}"))
}

/// Takes `key` through `locker` within [`CONTENDER_WAIT`] (less than the previous holder's
/// [`LONG_LEASE`]) and fails unless it comes within [`HANDOVER`] of `freed`.
pub async fn assert_taken_soon(locker: &Locker, key: &str, freed: Instant, how: &str) {
    let guard = locker
        .lock(key)
        .lease(LONG_LEASE)
        .wait(CONTENDER_WAIT)
        .acquire()
        .await
        .unwrap_or_else(|e| panic!("after the holder's {how}, the lock stayed taken: {e}"));
    let took = freed.elapsed();
    assert!(
        took < HANDOVER,
        "the lock came {took:?} after the holder's {how}"
    );
    guard.release().await.expect("release");
}

/// Whether a task of its own, outside any holder's scope, gets `key` from `locker` now (and
/// gives it back at once). Inside a scope, a clone of the holder's locker (all that memory
/// has) would re-enter instead.
pub async fn free_for_another_task(locker: &Locker, key: &str) -> bool {
    let (locker, key) = (locker.clone(), key.to_owned());
    let got = tokio::spawn(async move { locker.lock(key).try_acquire().await })
        .await
        .expect("the spawned task")
        .expect("try_acquire");
    match got {
        Some(guard) => {
            guard.release().await.expect("release");
            true
        }
        None => false,
    }
}

/// A call of a load loop that the server did not answer in time (`Unavailable`): a loaded
/// machine's, not a broken rule. The loops judge who holds at once by their own counters,
/// changed before a release is sent, so a release whose outcome is unknown (the library gives
/// the lock back in the background, or its lease ends) or an acquire that failed so breaks
/// nothing they check; the loop goes on. `Some` when the call succeeded; any other error fails
/// the test. (On etcd, releases that took over 500 ms while the machine compiled failed two
/// loops in one CI run.)
pub fn unless_unanswered<T>(
    what: &str,
    result: Result<T, leasehold::LockError>,
    unanswered: &std::sync::atomic::AtomicUsize,
) -> Option<T> {
    match result {
        Ok(done) => Some(done),
        Err(e) if e.is_unavailable() => {
            unanswered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            None
        }
        Err(e) => panic!("{what}: {e}"),
    }
}
