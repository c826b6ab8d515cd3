//! 3. A waiter is woken by the holder's release, not by the end of its lease.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

use super::support::{CONTENDER_WAIT, HANDOVER, LONG_LEASE};

/// A waiter on a lock held with a 10 s lease gets it within [`HANDOVER`] of the release, with
/// a greater fence.
pub async fn on_release(engine: &Engine) {
    let holder = engine.locker().await;
    let waiter = engine.locker().await;
    let guard = holder
        .lock("wake")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let waiting = tokio::spawn(async move {
        let got = waiter
            .lock("wake")
            .lease(LONG_LEASE)
            .wait(CONTENDER_WAIT)
            .acquire()
            .await;
        (got, Instant::now())
    });
    // Time for the waiter to find the lock taken and start waiting; if it has not yet, it
    // takes the lock right after the release all the same.
    sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "the waiter returned while the lock was held"
    );
    let fence = guard.fence();
    let released = Instant::now();
    guard.release().await.expect("release");
    let (got, at) = waiting.await.expect("the waiting task");
    let got = got.expect("the waiter gets the lock after the release");
    let took = at - released;
    eprintln!("{}: waiter woke {took:?} after the release", engine.kind());
    assert!(
        took < HANDOVER,
        "the waiter got the lock {took:?} after the release: not woken by it"
    );
    assert!(got.fence() > fence);
    got.release().await.expect("release");
}
