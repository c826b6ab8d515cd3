//! Locks through Redis Sentinel (master, replica, three sentinels started by the harness):
//! locking survives a failover without restarting the application, and `min_replicas`
//! refuses locks that no replica has.

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::Sentinels;
use tokio::time::Instant;

#[tokio::test]
async fn locking_works_again_after_a_failover() {
    let setup = Sentinels::start().await;
    let locker = Locker::builder()
        .sentinel(setup.sentinel_urls(), setup.master_name())
        .op_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("sentinel locker");
    let before = locker.lock("order:1").acquire().await.unwrap();
    let fence_before = before.fence();
    before.release().await.unwrap();

    setup
        .kill_master_and_wait_failover(Duration::from_secs(20))
        .await;
    // The same locker, no restart: it asks the sentinels for the new master.
    let deadline = Instant::now() + Duration::from_secs(10);
    let guard = loop {
        match locker
            .lock("order:1")
            .wait(Duration::from_millis(200))
            .acquire()
            .await
        {
            Ok(g) => break g,
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_unavailable() || e.is_busy(), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no lock after the failover: {e}"),
        }
    };
    // The replica had the fence counter (or it is re-seeded from the clock): still larger.
    assert!(guard.fence() > fence_before);
    guard.release().await.unwrap();
}

#[tokio::test]
async fn min_replicas_refuses_a_lock_no_replica_acknowledged() {
    let setup = Sentinels::start().await;
    let locker = Locker::builder()
        .sentinel(setup.sentinel_urls(), setup.master_name())
        .min_replicas(1)
        .op_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("sentinel locker");
    locker
        .lock("r")
        .acquire()
        .await
        .expect("one replica acknowledges")
        .release()
        .await
        .unwrap();

    setup.replica().pause();
    let err = locker
        .lock("r")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    setup.replica().resume();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("replicas acknowledged"), "{err}");
    // Nothing stays locked on the master.
    let mut conn = setup.master().conn().await;
    let held: Option<String> = redis::AsyncCommands::get(&mut conn, "leasehold:lock:{r}")
        .await
        .unwrap();
    assert_eq!(held, None);
}
