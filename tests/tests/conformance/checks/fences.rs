//! 2. Fencing tokens strictly increase per key, across holders and lease expiries.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::sleep;

use super::support::LONG_LEASE;

/// Two lockers take turns on one key, then a holder lets its lease run out: every fence is
/// greater than the one before, and the expired holder's late release leaves its successor's
/// lock alone.
pub async fn increase_across_holders(engine: &Engine) {
    let lockers = [engine.locker().await, engine.locker().await];
    let mut last = 0;
    for round in 0..10 {
        let guard = lockers[round % 2]
            .lock("fence")
            .acquire()
            .await
            .expect("a free lock");
        assert!(
            guard.fence() > last,
            "round {round}: fence {} after {last}",
            guard.fence()
        );
        last = guard.fence();
        guard.release().await.expect("release");
    }
    // A holder whose lease ran out is followed by a greater fence, and its late release
    // (dropped guard) leaves the new holder's lock alone.
    let expiring = lockers[0]
        .lock("fence")
        .lease(Duration::from_millis(200))
        .watchdog(false)
        .acquire()
        .await
        .expect("a free lock");
    assert!(expiring.fence() > last);
    let next = lockers[1]
        .lock("fence")
        .lease(LONG_LEASE)
        .wait(Duration::from_secs(3))
        .acquire()
        .await
        .expect("the lock after the lease ran out");
    assert!(
        next.fence() > expiring.fence(),
        "fence {} after an expired holder's {}",
        next.fence(),
        expiring.fence()
    );
    drop(expiring);
    sleep(Duration::from_millis(200)).await;
    assert!(next.is_held());
    let third = engine.locker().await;
    assert!(
        third.lock("fence").try_acquire().await.unwrap().is_none(),
        "the expired holder's release freed its successor's lock"
    );
    next.release()
        .await
        .expect("the successor's lock is still its own");
}
