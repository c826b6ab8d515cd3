//! Closing a locker (`kernel::close`), on the in-memory and scripted stores with Tokio's paused
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

/// An acquire in flight when the locker closes: its call has taken the lock in the store, its
/// answer is on its way. `close` waits for that answer and gives the lock back before it
/// reports drained: a process that exits once `close` returned leaves nothing behind. It
/// reported drained at once, with the lock still taken, to live its lease after the exit.
#[tokio::test(start_paused = true)]
async fn close_waits_for_an_acquire_in_flight_and_gives_its_lock_back() {
    let store = ScriptedStore::new();
    let a = Locker::scripted(store.clone());
    let lock = "leasehold:lock:{k}";
    store.answer_late(1, Duration::from_millis(300));
    let acquiring = tokio::spawn({
        let a = a.clone();
        async move { a.lock("k").lease(LONG).acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(store.is_locked(lock), "the acquire did not reach the store");
    let report = a.close().await;
    assert!(report.drained, "{report:?}");
    assert!(
        !store.is_locked(lock),
        "close reported drained while the lock its acquire took was still held: {report:?}"
    );
    let answer = acquiring.await.unwrap();
    assert!(matches!(answer, Err(LockError::Closed)), "{answer:?}");
}

/// The same for `lock_all`: the key whose acquire is in flight is given back, and no later key
/// is taken.
#[tokio::test(start_paused = true)]
async fn close_waits_for_a_lock_all_in_flight() {
    let store = ScriptedStore::new();
    let a = Locker::scripted(store.clone());
    store.answer_late(1, Duration::from_millis(300));
    let acquiring = tokio::spawn({
        let a = a.clone();
        async move { a.lock_all(["x", "y"]).lease(LONG).acquire().await.map(drop) }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let report = a.close().await;
    assert!(report.drained, "{report:?}");
    for lock in ["leasehold:lock:{x}", "leasehold:lock:{y}"] {
        assert!(!store.is_locked(lock), "{lock} left held: {report:?}");
    }
    let answer = acquiring.await.unwrap();
    assert!(matches!(answer, Err(LockError::Closed)), "{answer:?}");
}

/// An answer later than `close`'s bound: `close` says it did not drain, rather than that it
/// did.
#[tokio::test(start_paused = true)]
async fn close_does_not_report_drained_while_an_acquire_is_still_in_flight() {
    let store = ScriptedStore::new();
    let a = Locker::scripted(store.clone());
    store.answer_late(1, Duration::from_secs(30));
    let acquiring = tokio::spawn({
        let a = a.clone();
        async move { a.lock("k").lease(LONG).acquire().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let report = a.close_within(Duration::from_secs(1)).await;
    assert!(!report.drained, "{report:?}");
    let answer = acquiring.await.unwrap();
    assert!(matches!(answer, Err(LockError::Closed)), "{answer:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        !store.is_locked("leasehold:lock:{k}"),
        "given back once answered"
    );
}
