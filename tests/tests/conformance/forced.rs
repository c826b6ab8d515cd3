//! Property 20, a forced release is seen at once by the forced-out process's own waiters: an operator
//! deletes a lock (`force_release`) while its holder's process has a task queued behind it;
//! the release heard in the engine has the holder's lease verified at once, so the lease is
//! reported lost and the queued task gets the lock within [`HANDOVER`], not a third of the
//! lease later (the next renewal).

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, timeout, Instant};

use super::support::{CONTENDER_WAIT, HANDOVER, LONG_LEASE};

pub async fn seen_by_the_holders_process(engine: &Engine) {
    let holder = engine.locker().await;
    let operator = engine.locker().await;
    let key = "forced";
    let guard = holder
        .lock(key)
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let queued = {
        let locker = holder.clone();
        tokio::spawn(async move {
            let got = locker
                .lock(key)
                .lease(LONG_LEASE)
                .wait(CONTENDER_WAIT)
                .acquire()
                .await;
            (got, Instant::now())
        })
    };
    // Queued behind the holder in its process (and subscribed to the lock's releases).
    sleep(Duration::from_millis(500)).await;
    assert!(!queued.is_finished(), "the queued task got a held lock");
    let forced = Instant::now();
    assert!(
        operator.force_release(key).await.expect("force_release"),
        "there was a lock to release"
    );
    timeout(HANDOVER, guard.lost()).await.unwrap_or_else(|_| {
        panic!("the forced-out guard still trusts its lease after {HANDOVER:?}")
    });
    assert!(!guard.is_held());
    let (got, at) = queued.await.expect("the queued task");
    let next = got.unwrap_or_else(|e| panic!("the queued task did not get the lock: {e}"));
    let took = at - forced;
    assert!(
        took < HANDOVER,
        "the forced-out process's queued task got the lock {took:?} after the forced release"
    );
    assert!(next.fence() > guard.fence());
    next.release().await.expect("release");
    drop(guard);
}

/// Engines where no operator can force a release through a locker (memory: the locks live in
/// one process; RedLock: each node is forced with a locker of its own) refuse it clearly.
pub async fn refused_clearly(engine: &Engine) {
    let locker = engine.locker().await;
    let err = locker
        .force_release("forced")
        .await
        .expect_err("no forced release through this locker");
    assert!(
        matches!(err, leasehold::LockError::Config { .. }),
        "{err:?}"
    );
}
