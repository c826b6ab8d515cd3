//! 6. A holder is told when its lease is lost.

use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::conformance::Engine;
use tokio::time::Instant;

use super::support::{bounded, LONG_LEASE, SLACK};

/// The engine is killed under a holder (lease 1 s, watchdog on): `lost()` resolves within
/// the lease plus op_timeout (+ slack), and the release says `Lost`: the guard was told, and
/// the work since then ran unprotected, whatever the unreachable engine would answer.
pub async fn when_the_engine_goes_away(engine: &Engine) {
    let locker = engine.locker().await;
    let lease = Duration::from_secs(1);
    let guard = locker
        .lock("loss")
        .lease(lease)
        .acquire()
        .await
        .expect("a free lock");
    let down = Instant::now();
    assert!(engine.take_down());
    bounded(
        "lost() after the engine went away",
        lease + engine.op_timeout() + SLACK,
        guard.lost(),
    )
    .await;
    eprintln!(
        "{}: loss noticed {:?} after the engine went away",
        engine.kind(),
        down.elapsed()
    );
    assert!(!guard.is_held());
    let released = bounded(
        "release of a lost lease",
        engine.acquire_bound(Duration::ZERO) + SLACK,
        guard.release(),
    )
    .await;
    let err = released.expect_err("a release with the engine gone");
    assert!(matches!(err, LockError::Lost { .. }), "{err:?}");
}

/// A holder with the watchdog off outlives its lease: `lost()` resolves, the next holder
/// gets the lock, and the late release says `Lost` and leaves the new holder's lock alone.
pub async fn when_the_lease_runs_out(engine: &Engine) {
    let a = engine.locker().await;
    let lease = Duration::from_millis(300);
    let guard = a
        .lock("loss")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .expect("a free lock");
    bounded("lost() at the lease's end", lease + SLACK, guard.lost()).await;
    assert!(!guard.is_held());
    // Waits (briefly): a waiter moves the local queue past a lost holder; `try_acquire`
    // alone answers `None` while the lost guard lives, on every engine.
    let next = a
        .lock("loss")
        .lease(LONG_LEASE)
        .wait(Duration::from_millis(500))
        .acquire()
        .await
        .expect("free once the lease ran out");
    let err = guard
        .release()
        .await
        .expect_err("the lock is another's now");
    assert!(err.is_lost(), "{err:?}");
    assert!(
        next.is_held(),
        "the lost holder's release touched the next holder's lock"
    );
    next.release().await.expect("release");
}
