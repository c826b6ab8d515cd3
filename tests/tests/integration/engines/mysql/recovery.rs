//! Recovery: a crashed holder's lock is taken over once its lease ran out on the server's
//! clock, and a holder keeps its lock across a server killed and restarted within its lease.

use std::time::Duration;

use leasehold_tests::harness::MysqlServer;

use super::{builder, locker, scalar};

/// A holder whose process died (its locker dropped without a release, the watchdog gone) keeps
/// the lock until its lease runs out; then another locker takes it over with a higher fence,
/// and the expired row does not linger as a second holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_of_a_crashed_holder_is_taken_over_once_its_lease_ran_out() {
    let db = MysqlServer::start().await;
    let lease = Duration::from_secs(1);
    let crashed = builder(&db.url())
        .default_watchdog(false)
        .build()
        .await
        .unwrap();
    let guard = crashed.lock("c").lease(lease).acquire().await.unwrap();
    let old = guard.fence();
    std::mem::forget(guard);
    drop(crashed);

    let other = locker(&db).await;
    assert!(
        matches!(other.lock("c").try_acquire().await, Ok(None)),
        "taken while the crashed holder's lease ran"
    );
    let taken = other
        .lock("c")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("taken over after the lease");
    assert!(taken.fence() > old, "{} after {old}", taken.fence());
    let rows: i64 = scalar(&db, "SELECT COUNT(*) FROM leasehold_locks")
        .await
        .parse()
        .unwrap();
    assert_eq!(rows, 1, "one row for the one held lock");
    taken.release().await.unwrap();
}

/// The server is killed and restarted while a lock is held with a lease longer than the
/// outage: the holder's renewals reach the restarted server, the lock stays its own (another
/// locker is refused), and is free once released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_keeps_its_lock_across_a_server_restart_within_its_lease() {
    let db = MysqlServer::start().await;
    let holder = locker(&db).await;
    let guard = holder
        .lock("r")
        .lease(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    db.restart().await;
    let other = locker(&db).await;
    assert!(matches!(other.lock("r").try_acquire().await, Ok(None)));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(guard.is_held(), "the lease was lost across the restart");
    guard.release().await.expect("release after the restart");
    assert!(other.lock("r").try_acquire().await.unwrap().is_some());
}
