//! Semaphores on the in-memory store, on Tokio's paused clock: never more than N holders,
//! permits of a crashed holder come back after its lease, waiters wake on a release and
//! queue first come, first served, disagreeing limits are refused, the watchdog renews every
//! permit, and inspection shows holders without their tokens.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::{LockError, Locker};

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn never_more_than_the_limit() {
    let locker = Locker::in_memory();
    let inside = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for t in 0..24u64 {
        let (locker, inside, most) = (locker.clone(), inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..5u64 {
                let permit = locker
                    .semaphore("api", 3)
                    .wait(LONG)
                    .acquire()
                    .await
                    .unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1 + (t * 7 + round) % 5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "the limit was reached, never passed"
    );
    assert_eq!(locker.inner.queues.len(), 0, "lines go when empty");
}

#[tokio::test(start_paused = true)]
async fn a_crashed_holders_permit_returns_after_its_lease() {
    let locker = Locker::in_memory();
    let lease = Duration::from_millis(300);
    let crashed = locker
        .semaphore("api", 1)
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    // A crash: never released, never renewed.
    std::mem::forget(crashed);
    let start = Instant::now();
    let permit = locker
        .semaphore("api", 1)
        .wait(LONG)
        .acquire()
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= lease - Duration::from_millis(20) && waited <= lease + Duration::from_secs(1),
        "{waited:?}"
    );
    drop(permit);
}

/// Regression: a limit left behind by holders whose leases all ended (they crashed) must not
/// refuse a new limit; only live holders' limit counts.
#[tokio::test(start_paused = true)]
async fn a_limit_changes_once_no_permit_of_it_is_held() {
    let locker = Locker::in_memory();
    let crashed = locker
        .semaphore("api", 2)
        .lease(Duration::from_millis(100))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    std::mem::forget(crashed);
    let e = locker.semaphore("api", 5).acquire().await.unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("limit of 2"), "{e}");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let five = locker.semaphore("api", 5).acquire().await.unwrap();
    assert_eq!(five.limit(), 5);
    let e = locker.semaphore("api", 2).acquire().await.unwrap_err();
    assert!(e.to_string().contains("limit of 5"), "{e}");
    five.release().await.unwrap();
    let two = locker.semaphore("api", 2).acquire().await.unwrap();
    drop(two);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_wakes_on_release_not_at_the_lease_end() {
    let locker = Locker::in_memory();
    let holder = locker
        .semaphore("api", 1)
        .lease(LONG)
        .acquire()
        .await
        .unwrap();
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let permit = locker.semaphore("api", 1).wait(LONG).acquire().await;
            (Instant::now(), permit)
        })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!waiter.is_finished());
    let released = Instant::now();
    holder.release().await.unwrap();
    let (got, permit) = waiter.await.unwrap();
    let _permit = permit.unwrap();
    assert!(
        got - released < Duration::from_millis(5),
        "woken {:?} after the release",
        got - released
    );
}

#[tokio::test(start_paused = true)]
async fn waiters_of_one_process_are_served_in_order() {
    let locker = Locker::in_memory();
    let holder = locker.semaphore("api", 1).acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        let (locker, order) = (locker.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let permit = locker
                .semaphore("api", 1)
                .wait(LONG)
                .acquire()
                .await
                .unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(3)).await;
            permit.release().await.unwrap();
        }));
        // Each waiter queues before the next one arrives.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    holder.release().await.unwrap();
    for w in waiters {
        w.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..6).collect::<Vec<_>>());
}

#[tokio::test(start_paused = true)]
async fn acquire_many_takes_all_or_nothing() {
    let locker = Locker::in_memory();
    let one = locker.semaphore("api", 4).acquire().await.unwrap();
    assert!(locker
        .semaphore("api", 4)
        .try_acquire_many(4)
        .await
        .unwrap()
        .is_none());
    let three = locker
        .semaphore("api", 4)
        .try_acquire_many(3)
        .await
        .unwrap()
        .expect("three of four are free");
    assert_eq!(three.permits(), 3);
    assert!(locker
        .semaphore("api", 4)
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let info = locker.inspect_semaphore("api").await.unwrap();
    assert_eq!((info.limit, info.in_use()), (Some(4), 4));
    let mut counts: Vec<u32> = info.holders.iter().map(|h| h.permits).collect();
    counts.sort();
    assert_eq!(counts, [1, 3]);
    three.release().await.unwrap();
    drop(one);
    tokio::task::yield_now().await;
    let info = locker.inspect_semaphore("api").await.unwrap();
    assert_eq!((info.limit, info.in_use()), (None, 0));
    let e = locker
        .semaphore("api", 4)
        .acquire_many(5)
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn the_watchdog_renews_every_permit_and_loss_is_reported() {
    let locker = Locker::in_memory();
    let lease = Duration::from_millis(300);
    let a = locker
        .semaphore("api", 2)
        .lease(lease)
        .acquire()
        .await
        .unwrap();
    let b = locker
        .semaphore("api", 2)
        .lease(lease)
        .acquire_many(1)
        .await
        .unwrap();
    tokio::time::sleep(lease * 5).await;
    assert!(a.is_held() && b.is_held());
    assert!(locker
        .semaphore("api", 2)
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    drop((a, b));
    let hard = locker
        .semaphore("api", 2)
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::timeout(lease * 2, hard.lost())
        .await
        .expect("lost() resolves at the lease's end");
    assert!(!hard.is_held());
    let e = hard.release().await.unwrap_err();
    assert!(matches!(e, LockError::Lost { .. }), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_leaves_nothing_behind() {
    let locker = Locker::in_memory();
    let holder = locker.semaphore("api", 1).acquire().await.unwrap();
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.semaphore("api", 1).wait(LONG).acquire().await })
    };
    let behind = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.semaphore("api", 1).wait(LONG).acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    waiter.abort();
    let _ = waiter.await;
    holder.release().await.unwrap();
    let permit = behind.await.unwrap().unwrap();
    permit.release().await.unwrap();
    tokio::task::yield_now().await;
    assert_eq!(locker.inner.queues.len(), 0);
    assert_eq!(locker.inspect_semaphore("api").await.unwrap().in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_permit_re_enters_inside_its_scope() {
    let locker = Locker::in_memory();
    let outer = locker.semaphore("api", 1).acquire().await.unwrap();
    outer
        .scope(async {
            let inner = locker.semaphore("api", 1).acquire().await.unwrap();
            assert!(inner.is_reentrant());
            let e = locker
                .semaphore("api", 1)
                .acquire_many(2)
                .await
                .unwrap_err();
            assert!(matches!(e, LockError::Config { .. }), "{e:?}");
        })
        .await;
    // A semaphore and a lock of one key are independent.
    let lock = locker.lock("api").try_acquire().await.unwrap();
    assert!(lock.is_some());
}

#[tokio::test(start_paused = true)]
async fn hostile_requests_are_clear_errors() {
    let locker = Locker::in_memory();
    for (permits, says) in [(0, "0 permits"), (u32::MAX, "above the limit")] {
        let e = locker
            .semaphore("api", permits)
            .acquire()
            .await
            .unwrap_err();
        assert!(matches!(e, LockError::Config { .. }), "{e:?}");
        assert!(e.to_string().contains(says), "{e}");
    }
    let e = locker.semaphore("", 2).acquire().await.unwrap_err();
    assert!(matches!(e, LockError::InvalidKey { .. }), "{e:?}");
    // Names that mimic internal keys are semaphores of their own.
    let a = locker
        .semaphore("x}:semlimit:{api", 1)
        .acquire()
        .await
        .unwrap();
    let b = locker.semaphore("api", 1).acquire().await.unwrap();
    drop((a, b));
}
