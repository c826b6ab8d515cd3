//! 10. Every call returns within its bound, whatever the engine does.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::Instant;

use super::support::{bounded, CONTENDER_WAIT, LONG_LEASE, SLACK};

/// With every lock server stalled: `acquire` (wait 1 s) and `try_acquire` fail with
/// `Unavailable` within `wait + 3 × op_timeout` (+ slack), so does `release`, and once
/// healed the engine grants locks again.
pub async fn when_stalled(engine: &Engine) {
    let locker = engine.locker().await;
    let held = locker
        .lock("stall-held")
        .lease(Duration::from_secs(3))
        .acquire()
        .await
        .expect("a free lock");
    assert!(engine.stall());
    let wait = Duration::from_secs(1);
    let started = Instant::now();
    let acquired = bounded(
        "acquire on a stalled engine",
        engine.acquire_bound(wait) + SLACK,
        locker.lock("stall-new").wait(wait).acquire(),
    )
    .await;
    let took = started.elapsed();
    let err = acquired.expect_err("no lock from a stalled engine");
    assert!(err.is_unavailable(), "{err:?}");
    eprintln!(
        "{}: acquire on a stalled engine failed after {took:?}: {err}",
        engine.kind()
    );
    let tried = bounded(
        "try_acquire on a stalled engine",
        engine.acquire_bound(Duration::ZERO) + SLACK,
        locker.lock("stall-try").try_acquire(),
    )
    .await;
    let err = tried.expect_err("no lock from a stalled engine");
    assert!(err.is_unavailable(), "{err:?}");
    let started = Instant::now();
    let released = bounded(
        "release on a stalled engine",
        engine.acquire_bound(Duration::ZERO) + SLACK,
        held.release(),
    )
    .await;
    eprintln!(
        "{}: release on a stalled engine returned after {:?}: {released:?}",
        engine.kind(),
        started.elapsed()
    );
    let err = released.expect_err("a release that cannot reach the engine");
    assert!(err.is_unavailable(), "{err:?}");
    engine.heal();
    let after = locker
        .lock("stall-after")
        .wait(CONTENDER_WAIT)
        .acquire()
        .await
        .expect("the engine serves again once healed");
    after.release().await.expect("release");
}

/// An `acquire` of a lock held meanwhile is `Busy` within its bound, and `release` returns
/// within its own.
pub async fn when_held(engine: &Engine) {
    let a = engine.locker().await;
    let held = a
        .lock("bounded")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let wait = Duration::from_secs(1);
    let err = bounded(
        "acquire of a held lock",
        engine.acquire_bound(wait) + SLACK,
        a.lock("bounded").wait(wait).acquire(),
    )
    .await
    .expect_err("the lock is held");
    assert!(err.is_busy(), "{err:?}");
    bounded(
        "release",
        engine.acquire_bound(Duration::ZERO) + SLACK,
        held.release(),
    )
    .await
    .expect("release");
}
