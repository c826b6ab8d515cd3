//! Locks through Redis Sentinel (master, replica, three sentinels started by the harness):
//! locking survives a failover without restarting the application, and `min_replicas`
//! refuses locks that no replica has.

use std::time::Duration;

use leasehold::{LockError, LockGuard, Locker};
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
    let guard = lock_after_failover(&locker, "order:1").await;
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

/// A master that only an ACL user may script (issue 31, "every engine as teams run it"): the
/// master's credentials come from the master URL (`redis://user:password@mymaster`), used on
/// the master the sentinels name, also after a failover; without them no lock is taken, and
/// the password shows in no message, `Debug` or description.
#[tokio::test]
async fn a_master_with_credentials_is_reached_with_the_master_urls_and_they_never_show() {
    const PASSWORD: &str = "s3cret-master";
    let setup = Sentinels::start_with_app_user("lockapp", PASSWORD).await;
    let build = |master: String| {
        Locker::builder()
            .sentinel(setup.sentinel_urls(), master)
            .op_timeout(Duration::from_millis(300))
            .build()
    };
    // Without the credentials the master refuses the scripts.
    let refused = build(setup.master_name().to_owned())
        .await
        .err()
        .map_or_else(|| "built".to_owned(), |e| format!("{e} {e:?}"));
    assert!(
        refused.contains("NOPERM") || refused.contains("permission"),
        "{refused}"
    );

    let master = format!("redis://lockapp:{PASSWORD}@{}", setup.master_name());
    let locker = build(master.clone())
        .await
        .expect("sentinel locker with credentials");
    let first = locker.lock("order:1").acquire().await.unwrap();
    let fence = first.fence();
    first.release().await.unwrap();
    for shown in [
        format!("{locker:?}"),
        format!(
            "{:?}",
            leasehold::Deployment::Sentinel {
                sentinels: setup.sentinel_urls(),
                master: master.clone(),
                min_replicas: 0,
            }
        ),
    ] {
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
    let err = Locker::builder()
        .sentinel(
            setup.sentinel_urls(),
            format!("ftp://lockapp:{PASSWORD}@mymaster"),
        )
        .build()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        !err.contains(PASSWORD) && err.contains("sentinel master"),
        "{err}"
    );

    // The promoted replica has the same users: the credentials go to it too.
    setup
        .kill_master_and_wait_failover(Duration::from_secs(20))
        .await;
    let guard = lock_after_failover(&locker, "order:1").await;
    assert!(guard.fence() > fence);
    guard.release().await.unwrap();
}

/// `key` locked by `locker` once it finds the new master: within 10 s of a failover, each
/// failure until then being the engine unreachable or the lock busy.
async fn lock_after_failover(locker: &Locker, key: &str) -> LockGuard {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match locker
            .lock(key)
            .wait(Duration::from_millis(200))
            .acquire()
            .await
        {
            Ok(g) => return g,
            Err(e) if Instant::now() < deadline => {
                assert!(e.is_unavailable() || e.is_busy(), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no lock on the new master after the failover: {e}"),
        }
    }
}
