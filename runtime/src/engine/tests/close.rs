//! Closing a locker (`engine::close`), on the in-memory and scripted stores with Tokio's paused
//! clock: what it gives back, what it refuses, and the waiters and guards it reaches.

use std::time::Duration;

use tokio::time::Instant;

use crate::store::scripted::ScriptedStore;
use crate::{LockError, Locker, LostReason};

const LONG: Duration = Duration::from_secs(60);

/// Another process gets the lock at once, not after the closed locker's lease.
#[tokio::test(start_paused = true)]
async fn close_gives_the_locks_back_at_once() {
    let store = ScriptedStore::new();
    let (a, b) = (Locker::scripted(store.clone()), Locker::scripted(store));
    let held = a.lock("k").lease(LONG).acquire().await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("k").wait(LONG).acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let started = Instant::now();
    let report = a.close().await;
    assert_eq!((report.released, report.unconfirmed), (1, 0), "{report:?}");
    assert!(report.drained);
    let got = waiter
        .await
        .unwrap()
        .expect("the other process gets the lock");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(!held.is_held());
    tokio::time::timeout(Duration::from_millis(1), held.lost())
        .await
        .expect("lost() resolves for a guard whose locker closed");
    let err = held.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::Lost {
                reason: LostReason::Closed
            }
        ),
        "{err:?}"
    );
    got.release().await.unwrap();
}

/// Every kind of call is refused once closed, and so are the acquires that were waiting
/// (locally or in the store) when it closed.
#[tokio::test(start_paused = true)]
async fn a_closed_locker_refuses_new_calls_and_ends_its_waits() {
    let locker = Locker::in_memory();
    let held = locker.lock("k").acquire().await.unwrap();
    let queued = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock("k").wait(LONG).acquire().await }
    });
    let reader = tokio::spawn({
        let locker = locker.clone();
        async move { locker.read_lock("k").wait(LONG).acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let started = Instant::now();
    locker.close().await;
    for waiting in [queued, reader] {
        let err = waiting.await.unwrap().unwrap_err();
        assert!(matches!(err, LockError::Closed), "{err:?}");
    }
    assert!(started.elapsed() < Duration::from_millis(100));
    drop(held);
    let closed = |r: Result<(), LockError>| matches!(r, Err(LockError::Closed));
    assert!(closed(locker.lock("x").acquire().await.map(drop)));
    assert!(closed(locker.lock("x").try_acquire().await.map(drop)));
    assert!(closed(locker.read_lock("x").acquire().await.map(drop)));
    assert!(closed(locker.semaphore("s", 2).acquire().await.map(drop)));
    assert!(closed(
        locker.lock_all(["a", "b"]).acquire().await.map(drop)
    ));
    assert!(closed(locker.leader("l").campaign().await.map(drop)));
    assert_eq!(LockError::Closed.code(), "lock_closed");
    assert!(locker.is_closed());
}

/// Permits and readers' shares go back too, and a leader resigns: every lease of the locker.
#[tokio::test(start_paused = true)]
async fn close_gives_back_every_kind_of_lease() {
    let locker = Locker::in_memory();
    let permits = locker.semaphore("s", 3).acquire_many(2).await.unwrap();
    let reader = locker.read_lock("r").acquire().await.unwrap();
    let leader = locker.leader("l").identity("me").campaign().await.unwrap();
    let mut observer = locker.observe_leader("l").unwrap();
    assert!(observer.next().await.unwrap().is_some());
    let report = locker.close().await;
    assert_eq!((report.released, report.unconfirmed), (3, 0), "{report:?}");
    assert!(!permits.is_held() && !reader.is_held() && !leader.is_leader());
    let seen = tokio::time::timeout(Duration::from_secs(2), observer.next())
        .await
        .expect("the observer hears the leader go");
    assert!(matches!(seen, Ok(None) | Err(_)), "{seen:?}");
}

/// A guard dropped just before: its background release is waited for.
#[tokio::test(start_paused = true)]
async fn close_waits_for_the_releases_in_the_background() {
    let store = ScriptedStore::new();
    let (a, b) = (
        Locker::scripted(store.clone()),
        Locker::scripted(store.clone()),
    );
    let held = a.lock("k").lease(LONG).acquire().await.unwrap();
    store.delay_next(1, Duration::from_millis(300));
    drop(held);
    // The background release is under way (its answer 300 ms late) when the locker closes.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let report = a.close().await;
    assert_eq!(report.released, 0, "{report:?}");
    assert!(report.drained, "{report:?}");
    assert!(
        b.lock("k").try_acquire().await.unwrap().is_some(),
        "released by then"
    );
}
