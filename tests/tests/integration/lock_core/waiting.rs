//! Waiting and cancellation: wake-ups on release, local waiters served in order by handoff,
//! re-entry in a scope, `try_acquire`, and cancelled acquires that leave nothing behind.

use std::sync::Arc;
use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::harness::RedisServer;
use tokio::time::Instant;

use super::locker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_leave_nothing_behind() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let remote = self::locker(&srv.url()).await;
    // A holder in another "process" keeps the lock busy while acquires are cancelled at
    // many different points: queued locally, contending in Redis, mid-round-trip.
    let holder = remote.lock("c").acquire().await.unwrap();
    let mut handles = Vec::new();
    for i in 0..200u64 {
        let locker = locker.clone();
        handles.push(tokio::spawn(async move {
            let cancel_after = Duration::from_micros((i * 137) % 3000);
            let _ = tokio::time::timeout(cancel_after, locker.lock("c").acquire()).await;
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    holder.release().await.unwrap();
    // Also cancel acquires that race with a free lock (some of them win the round trip).
    for i in 0..200u64 {
        let cancel_after = Duration::from_micros((i * 53) % 400);
        let _ = tokio::time::timeout(cancel_after, locker.lock("c").acquire()).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        srv.keys("leasehold:lock:*").await.is_empty(),
        "a cancelled acquire left a lock"
    );
    // The local queue is not stuck either: the same locker takes the lock at once.
    let g = locker
        .lock("c")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .expect("queue stalled by a cancelled waiter");
    g.release().await.unwrap();
    let renewals = srv.info_stat("cmdstat_evalsha").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        srv.info_stat("cmdstat_evalsha").await,
        renewals,
        "no renewals left"
    );
}

#[tokio::test]
async fn a_waiter_in_another_process_wakes_on_release_not_at_expiry() {
    let srv = RedisServer::start().await;
    let holder = locker(&srv.url()).await;
    let waiter = locker(&srv.url()).await;
    let guard = holder
        .lock("w")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    let waiting = tokio::spawn(async move {
        let g = waiter.lock("w").acquire().await.unwrap();
        let at = Instant::now();
        g.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    guard.release().await.unwrap();
    let acquired_at = waiting.await.unwrap();
    let delay = acquired_at - released_at;
    assert!(delay < Duration::from_millis(100), "woke after {delay:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_waiters_are_served_in_order_by_handoff() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let first = locker.lock("fifo").acquire().await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..10 {
        let (locker, order) = (locker.clone(), order.clone());
        handles.push(tokio::spawn(async move {
            let g = locker.lock("fifo").acquire().await.unwrap();
            order.lock().unwrap().push((i, g.fence()));
            g.release().await.unwrap();
        }));
        // Queue them in a known order.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = srv.info_stat("cmdstat_evalsha").await;
    first.release().await.unwrap();
    for h in handles {
        h.await.unwrap();
    }
    let scripts = srv.info_stat("cmdstat_evalsha").await - before;
    let order = order.lock().unwrap().clone();
    let ids: Vec<i32> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>(), "first come, first served");
    assert!(order.windows(2).all(|w| w[0].1 < w[1].1), "fences increase");
    // The first holder reserved no fences for later waiters (none were queued when it
    // acquired), so its release goes through Redis (1) and the first waiter acquires (1),
    // reserving fences for the nine behind it; they get the lease handed over without a
    // round trip, and the last one releases (1). No retries, no polling.
    assert_eq!(scripts, 3);
}

#[tokio::test]
async fn nested_acquire_in_scope_reenters_but_siblings_do_not() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let outer = locker.lock("re").acquire().await.unwrap();
    // The locker's first lock has its description written once, in the background: let it
    // land before counting.
    leasehold_tests::harness::eventually("the description", Duration::from_secs(5), || async {
        !srv.keys("leasehold:locker:*").await.is_empty()
    })
    .await;
    let before = srv.info_stat("total_commands_processed").await;
    outer
        .scope(async {
            let inner = locker
                .lock("re")
                .wait(Duration::ZERO)
                .acquire()
                .await
                .unwrap();
            assert!(inner.is_reentrant());
            assert_eq!(inner.fence(), outer.fence());
            inner.release().await.unwrap();
        })
        .await;
    // INFO itself counts once.
    assert!(srv.info_stat("total_commands_processed").await - before <= 1);
    assert!(
        outer.is_held(),
        "the nested release must not free the outer lock"
    );
    // Outside the scope (a sibling future of the same task) the lock is someone else's.
    let sibling = locker
        .lock("re")
        .wait(Duration::from_millis(50))
        .acquire()
        .await;
    assert!(matches!(sibling, Err(LockError::Busy { .. })));
    outer.release().await.unwrap();
}

#[tokio::test]
async fn try_acquire_never_waits() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    let g = a.lock("t").acquire().await.unwrap();
    let start = Instant::now();
    assert!(b.lock("t").try_acquire().await.unwrap().is_none());
    assert!(a.lock("t").try_acquire().await.unwrap().is_none());
    assert!(start.elapsed() < Duration::from_millis(100));
    let busy = b
        .lock("t")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .unwrap_err();
    match busy {
        LockError::Busy { retry_after } => {
            let left = retry_after.expect("remaining lease reported");
            assert!(left > Duration::from_secs(25) && left <= Duration::from_secs(30));
        }
        other => panic!("{other}"),
    }
    g.release().await.unwrap();
}

#[tokio::test]
async fn a_local_waiter_takes_over_from_a_lost_holder_in_the_same_process() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    // The holder's lease runs out while it still has its guard (it hangs, say).
    let hung = locker
        .lock("l")
        .lease(Duration::from_millis(150))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let start = Instant::now();
    let next = locker
        .lock("l")
        .wait(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert!(!hung.is_held());
    assert!(next.fence() > hung.fence());
    assert!(matches!(hung.release().await, Err(LockError::Lost { .. })));
    assert!(next.is_held());
    next.release().await.unwrap();
    assert!(srv.keys("leasehold:lock:*").await.is_empty());
}

#[tokio::test]
async fn releases_publish_wake_ups_only_when_someone_waits() {
    let srv = RedisServer::start().await;
    let a = locker(&srv.url()).await;
    let b = locker(&srv.url()).await;
    for _ in 0..50 {
        a.lock("quiet")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    assert_eq!(srv.info_stat("cmdstat_publish").await, 0, "nobody waited");
    let held = a.lock("busy").acquire().await.unwrap();
    let waiter =
        tokio::spawn(async move { b.lock("busy").acquire().await.unwrap().release().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(
        srv.info_stat("cmdstat_publish").await,
        1,
        "one waiter, one wake-up"
    );
}
