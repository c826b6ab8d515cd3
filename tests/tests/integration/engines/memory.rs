//! `Locker::in_memory()` keeps the semantics of the Redis backend: exclusion, waiting with
//! wake-ups, fences, lease expiry, cancellation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, Locker};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusive_under_100_tasks() {
    let locker = Locker::in_memory();
    let in_body = Arc::new(AtomicUsize::new(0));
    let total = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..100 {
        let (locker, in_body, total) = (locker.clone(), in_body.clone(), total.clone());
        handles.push(tokio::spawn(async move {
            let g = locker.lock("k").acquire().await.unwrap();
            assert_eq!(
                in_body.fetch_add(1, Ordering::SeqCst),
                0,
                "two holders at once"
            );
            let n = total.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(1)).await;
            total.store(n + 1, Ordering::SeqCst);
            in_body.fetch_sub(1, Ordering::SeqCst);
            g.release().await.unwrap();
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    assert_eq!(total.load(Ordering::SeqCst), 100);
}

#[tokio::test]
async fn separate_stores_do_not_share_locks_but_clones_do() {
    let a = Locker::in_memory();
    let b = Locker::in_memory();
    let g = a.lock("k").acquire().await.unwrap();
    assert!(b.lock("k").try_acquire().await.unwrap().is_some());
    assert!(a.clone().lock("k").try_acquire().await.unwrap().is_none());
    g.release().await.unwrap();
}

#[tokio::test]
async fn expiry_fences_and_stale_release() {
    let locker = Locker::in_memory();
    let stale = locker
        .lock("k")
        .lease(Duration::from_millis(50))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let start = Instant::now();
    let next = locker
        .lock("k")
        .wait(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    assert!(start.elapsed() >= Duration::from_millis(40));
    assert!(!stale.is_held());
    assert!(next.fence() > stale.fence());
    assert!(matches!(stale.release().await, Err(LockError::Lost { .. })));
    assert!(next.is_held());
    next.release().await.unwrap();
}

#[tokio::test]
async fn watchdog_renews_in_memory_too() {
    let locker = Locker::in_memory();
    let g = locker
        .lock("k")
        .lease(Duration::from_millis(100))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(g.is_held());
    assert!(locker.lock("k").try_acquire().await.unwrap().is_none());
    g.release().await.unwrap();
    assert!(locker.lock("k").try_acquire().await.unwrap().is_some());
}

#[tokio::test]
async fn cancelled_waiters_do_not_stall_the_queue() {
    let locker = Locker::in_memory();
    let holder = locker.lock("k").acquire().await.unwrap();
    for i in 0..50u64 {
        let cancel_after = Duration::from_micros(i * 100);
        let _ = tokio::time::timeout(cancel_after, locker.lock("k").acquire()).await;
    }
    holder.release().await.unwrap();
    let g = locker
        .lock("k")
        .wait(Duration::from_millis(100))
        .acquire()
        .await
        .expect("queue stalled");
    g.release().await.unwrap();
}

#[tokio::test]
async fn busy_reports_the_remaining_lease() {
    let locker = Locker::in_memory();
    let other = locker.clone();
    let g = locker
        .lock("k")
        .lease(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    // A second task in the same process waits in the local queue and gives up at `wait`.
    let start = Instant::now();
    let err = tokio::spawn(async move {
        other
            .lock("k")
            .wait(Duration::from_millis(100))
            .acquire()
            .await
            .unwrap_err()
    })
    .await
    .unwrap();
    assert!(err.is_busy(), "{err}");
    assert!(start.elapsed() >= Duration::from_millis(100));
    // The holder is in this process: the hint comes from its lease.
    match err {
        LockError::Busy {
            retry_after: Some(left),
        } => assert!(
            left > Duration::from_secs(4) && left <= Duration::from_secs(5),
            "{left:?}"
        ),
        other => panic!("no retry hint: {other:?}"),
    }
    g.release().await.unwrap();
}
