//! 5. The watchdog renews a lease for as long as its guard lives.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

/// A 600 ms lease held for five leases with the watchdog on: never lost, never taken by
/// another locker, and still ours at the release.
pub async fn keeps_the_lease_alive(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let lease = Duration::from_millis(600);
    let guard = a
        .lock("watchdog")
        .lease(lease)
        .acquire()
        .await
        .expect("a free lock");
    let since = Instant::now();
    while since.elapsed() < 5 * lease {
        tokio::select! {
            _ = guard.lost() => panic!("lost after {:?} with the watchdog on", since.elapsed()),
            _ = sleep(Duration::from_millis(100)) => {}
        }
        assert!(guard.is_held(), "not held after {:?}", since.elapsed());
        assert!(
            b.lock("watchdog").try_acquire().await.unwrap().is_none(),
            "another locker took the lock {:?} into a hold the watchdog renews",
            since.elapsed()
        );
    }
    guard.release().await.expect("still ours after five leases");
    let next = b
        .lock("watchdog")
        .try_acquire()
        .await
        .unwrap()
        .expect("free once released");
    next.release().await.expect("release");
}
