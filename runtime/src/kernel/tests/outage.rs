//! Riding out an outage (`kernel::outage`), on the scripted store and Tokio's paused clock: a
//! waiting acquire tries an unavailable engine again until its wait is over, gives back what
//! a failed attempt may have taken, and fails at once when it does not wait or was told not
//! to retry.

use std::time::Duration;

use tokio::time::Instant;

use crate::store::scripted::ScriptedStore;
use crate::Locker;

/// Calls failing for about 3 s do not end a 10 s wait: the lock is taken once they stop.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_waiting_acquire_outlasts_an_outage() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    // Each failed attempt and its give-back fail: six attempts, paused 100 ms, 200, 400, 800
    // and 1.6 s (each jittered down to half at most), span more than a second.
    store.fail_next(12);
    let started = Instant::now();
    let guard = locker
        .lock("k")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the acquire rides out the outage");
    assert!(guard.is_held());
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A failed attempt that landed (its answer was lost) is given back before the next attempt
/// takes the lock: nothing of it holds the lock afterwards, and the next holder's release
/// frees it for everyone.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn what_a_failed_attempt_took_is_given_back() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    let other = Locker::scripted(store.clone());
    store.lose_answers(1);
    let guard = locker
        .lock("k")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the second attempt takes the lock");
    guard.release().await.expect("released");
    // Had the lost attempt's lease stayed, the lock would be held for its whole lease.
    let next = other
        .lock("k")
        .try_acquire()
        .await
        .expect("no fault")
        .expect("free once the holder released: the lost attempt was given back");
    next.release().await.unwrap();
}

/// The error comes when the wait is over, and says the engine was out the whole time.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_outage_longer_than_the_wait_ends_it_at_the_deadline() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    store.fail_next(1000);
    let wait = Duration::from_secs(5);
    let started = Instant::now();
    let err = locker.lock("k").wait(wait).acquire().await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(
        err.to_string().contains("unavailable until the wait ended"),
        "{err}"
    );
    assert_eq!(started.elapsed(), wait);
}

/// No retry for an acquire that does not wait, nor for one told not to.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn no_retry_without_a_wait_or_when_turned_off() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    store.fail_next(1);
    let started = Instant::now();
    let err = locker.lock("k").try_acquire().await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(started.elapsed(), Duration::ZERO);
    // The failed attempt's give-back runs in the background first (it would take the next
    // scripted failure).
    tokio::time::sleep(Duration::from_millis(10)).await;
    store.fail_next(1);
    let started = Instant::now();
    let err = locker
        .lock("k")
        .wait(Duration::from_secs(10))
        .retry_unavailable(false)
        .acquire()
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(started.elapsed(), Duration::ZERO);
    store.heal();
    // The local turn passes on once the failed attempt's give-back ran.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let guard = locker.lock("k").try_acquire().await.unwrap();
    assert!(guard.is_some());
}

/// Several keys at once ride out an outage too (the one-round-trip attempt fails, then key by
/// key).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn several_keys_ride_out_an_outage() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    store.fail_next(4);
    let guards = locker
        .lock_all(["a", "b"])
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the multi-key acquire rides out the outage");
    assert!(guards.is_held());
}

/// Delays the store's next call by 100 ms and drops its connection 50 ms into it (on the
/// paused clock): the attempt read the session before the drop and is answered after it.
fn drop_connection_during_next_call(store: &ScriptedStore) -> tokio::task::JoinHandle<()> {
    store.delay_next(1, Duration::from_millis(100));
    let store = store.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        store.drop_connection();
    })
}

/// A grant that came over a connection that dropped while the answer was on its way (the
/// session the attempt read before sending ended) is not counted on: a guard over it would be
/// lost at once, and the lock may be gone with the old connection. It is given back and the
/// wait tries again: the acquire returns a guard that holds, and a `try_acquire` an
/// `Unavailable` that says why, with nothing left taken.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_grant_over_a_connection_that_dropped_meanwhile_is_not_counted_on() {
    let store = ScriptedStore::new();
    let locker = Locker::scripted(store.clone());
    // The attempt reads the session, then reaches the store 100 ms later; the connection
    // drops in between.
    let dropping = drop_connection_during_next_call(&store);
    let guard = locker
        .lock("k")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("the wait takes the lock over the new connection");
    dropping.await.unwrap();
    assert!(guard.is_held(), "the guard returned holds");
    guard.release().await.expect("and releases cleanly");
    assert!(!store.is_locked("leasehold:lock:{k}"));

    let dropping = drop_connection_during_next_call(&store);
    let tried = locker.lock("k").try_acquire().await;
    dropping.await.unwrap();
    let err = tried.expect_err("no guard to count on");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(err.to_string().contains("dropped while the lease"), "{err}");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        !store.is_locked("leasehold:lock:{k}"),
        "the grant was given back"
    );
}
