//! 4. `Busy` after waiting out a held lock; `try_acquire` as the non-waiting form.

use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::conformance::Engine;
use tokio::time::Instant;

use super::support::{bounded, LONG_LEASE, SLACK};

/// `Busy` only once the wait is over (and at once with no wait), `try_acquire` `None` while
/// held and `Some` when free; the next holder's fence is greater.
pub async fn after_waiting_and_try_acquire(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let guard = a
        .lock("busy")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let err = bounded(
        "an acquire of a held lock",
        engine.acquire_bound(wait) + SLACK,
        b.lock("busy").wait(wait).acquire(),
    )
    .await
    .expect_err("the lock is held");
    let took = started.elapsed();
    assert!(matches!(err, LockError::Busy { .. }), "{err:?}");
    assert!(
        took >= wait,
        "Busy after {took:?}, before the wait of {wait:?} was over"
    );
    if let LockError::Busy {
        retry_after: Some(left),
    } = err
    {
        assert!(
            left <= LONG_LEASE,
            "retry_after {left:?} beyond the holder's lease"
        );
    }
    let err = b
        .lock("busy")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect_err("the lock is held");
    assert!(err.is_busy(), "{err:?}");
    assert!(b.lock("busy").try_acquire().await.unwrap().is_none());
    let free = b
        .lock("busy-other")
        .try_acquire()
        .await
        .unwrap()
        .expect("another key is free");
    free.release().await.expect("release");
    let fence = guard.fence();
    guard.release().await.expect("release");
    let next = b
        .lock("busy")
        .try_acquire()
        .await
        .unwrap()
        .expect("free once released");
    assert!(next.fence() > fence);
    next.release().await.expect("release");
}
