//! Singleton jobs on Tokio's paused clock: `hold_at_least` keeps a lock taken after an early
//! release (by expiry where locks expire, by a release at the right moment where they live
//! with the session), releases at once after a late one; `hold_at_most` is a lease nobody
//! renews, and a body running past it is cancelled; `on_busy = "skip"` skips. Two lockers on
//! one scripted store stand for two processes.

use std::time::Duration;

use tokio::time::Instant;

use crate::__private::{self, LeaseKind, OnLost, Spec};
use crate::store::keys::LockKeys;
use crate::store::scripted::ScriptedStore;
use crate::{LockError, LockGuard, Locker};

const KEY: &str = "job:nightly-report";
const HOLD: Duration = Duration::from_secs(10);
/// Less than any margin the assertions leave on either side of an instant.
const TICK: Duration = Duration::from_millis(5);

/// Two processes on one store.
fn two_processes() -> (ScriptedStore, Locker, Locker) {
    let store = ScriptedStore::new();
    let a = Locker::scripted(store.clone());
    let b = Locker::scripted(store.clone());
    (store, a, b)
}

/// Whether `locker` could take the lock now (and gives it back if so).
async fn free_for(locker: &Locker) -> bool {
    match locker.lock(KEY).try_acquire().await.unwrap() {
        Some(guard) => {
            guard.release().await.unwrap();
            true
        }
        None => false,
    }
}

/// Lets the background task run what it was handed.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_that_ends_early_keeps_the_lock_until_the_hold_ends() {
    let (store, a, b) = two_processes();
    let start = Instant::now();
    let guard = a.lock(KEY).hold_at_least(HOLD).acquire().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    guard.release().await.unwrap();

    assert!(!free_for(&b).await, "released early, but not held any more");
    tokio::time::sleep_until(start + HOLD - TICK).await;
    assert!(!free_for(&b).await, "free before the hold ended");
    assert!(
        !free_for(&a).await,
        "free for its own process before the hold ended"
    );
    tokio::time::sleep_until(start + HOLD + TICK).await;
    assert!(!store.is_locked(LockKeys::new(&a.inner.prefix, KEY).lock()));
    assert!(free_for(&b).await, "still held after the hold ended");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_guard_keeps_the_hold_too() {
    let (_store, a, b) = two_processes();
    let start = Instant::now();
    let guard = a.lock(KEY).hold_at_least(HOLD).acquire().await.unwrap();
    drop(guard); // a panic, `?`, a cancelled body
    settle().await;
    tokio::time::sleep_until(start + HOLD - TICK).await;
    assert!(!free_for(&b).await);
    tokio::time::sleep_until(start + HOLD + TICK).await;
    assert!(free_for(&b).await);
}

#[tokio::test(start_paused = true)]
async fn a_job_that_outlasts_the_hold_is_released_at_once() {
    let (_store, a, b) = two_processes();
    let guard = a
        .lock(KEY)
        .hold_at_least(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    guard.release().await.unwrap();
    assert!(free_for(&b).await);
}

#[tokio::test(start_paused = true)]
async fn a_hold_longer_than_the_lease_is_kept_by_renewals_then_by_expiry() {
    let (_store, a, b) = two_processes();
    let start = Instant::now();
    let guard = a
        .lock(KEY)
        .lease(Duration::from_secs(1))
        .hold_at_least(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    // Renewed by the watchdog meanwhile; the store would have freed it after 1 s otherwise.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(guard.is_held());
    guard.release().await.unwrap();
    // 2 s left: twice the lease, kept by the expiry the release set.
    tokio::time::sleep_until(start + Duration::from_secs(5) - TICK).await;
    assert!(!free_for(&b).await);
    tokio::time::sleep_until(start + Duration::from_secs(5) + TICK).await;
    assert!(free_for(&b).await);
}

#[tokio::test(start_paused = true)]
async fn a_hold_longer_than_an_unrenewed_lease_is_refused() {
    let locker = Locker::in_memory();
    let refused = locker
        .lock(KEY)
        .lease(Duration::from_secs(1))
        .watchdog(false)
        .hold_at_least(Duration::from_secs(2))
        .acquire()
        .await;
    match refused {
        Err(LockError::Config { message, .. }) => {
            assert!(message.contains("hold_at_least"), "{message}")
        }
        other => panic!("expected a Config error, got {other:?}"),
    }
    // Zero is no hold at all.
    let guard = locker
        .lock(KEY)
        .hold_at_least(Duration::ZERO)
        .acquire()
        .await
        .unwrap();
    guard.release().await.unwrap();
    assert!(free_for(&locker).await);
}

#[tokio::test(start_paused = true)]
async fn where_locks_live_with_the_session_the_locker_releases_at_the_end_of_the_hold() {
    let (store, a, b) = two_processes();
    store.keep_locks_for_the_session();
    let start = Instant::now();
    let guard = a
        .lock(KEY)
        .lease(Duration::from_secs(1))
        .hold_at_least(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    guard.release().await.unwrap();
    // A waiter of another process wakes when the background task releases the lock.
    let waiter = tokio::spawn(async move {
        let guard = b
            .lock(KEY)
            .wait(Duration::from_secs(20))
            .acquire()
            .await
            .unwrap();
        (Instant::now(), guard.release().await)
    });
    tokio::time::sleep_until(start + Duration::from_secs(5) - TICK).await;
    assert!(
        !waiter.is_finished(),
        "the lock was free before the hold ended (the watchdog stopped renewing it?)"
    );
    let (got_it, released) = waiter.await.unwrap();
    released.unwrap();
    assert!(got_it >= start + Duration::from_secs(5), "{got_it:?}");
    assert!(free_for(&a).await);
}

#[tokio::test(start_paused = true)]
async fn a_local_waiter_is_not_handed_the_lock_during_the_hold() {
    let locker = Locker::scripted(ScriptedStore::new());
    let start = Instant::now();
    let first = locker
        .lock(KEY)
        .hold_at_least(HOLD)
        .acquire()
        .await
        .unwrap();
    let fence = first.fence();
    let second = {
        let locker = locker.clone();
        tokio::spawn(async move {
            let guard = locker
                .lock(KEY)
                .wait(Duration::from_secs(30))
                .acquire()
                .await
                .unwrap();
            (Instant::now(), guard.fence())
        })
    };
    settle().await;
    first.release().await.unwrap();
    let (got_it, next_fence) = second.await.unwrap();
    assert!(
        got_it >= start + HOLD,
        "handed over during the hold at {got_it:?}"
    );
    assert!(next_fence > fence);
}

fn spec(lease: Option<Duration>, watchdog: Option<bool>, hold: Option<Duration>) -> Spec {
    Spec {
        lease,
        wait: None,
        watchdog,
        on_lost: OnLost::Cancel,
        kind: LeaseKind::Exclusive,
        fair: false,
        hold_at_least: hold,
        profile: None,
        site: None,
    }
}

/// What `#[distributed_lock(hold_at_most = "10m")]` expands to: a lease of 10 minutes that
/// nobody renews.
fn hold_at_most(d: Duration) -> Spec {
    spec(Some(d), Some(false), None)
}

#[tokio::test(start_paused = true)]
async fn a_body_that_runs_past_hold_at_most_is_cancelled() {
    let (_store, a, b) = two_processes();
    let spec = hold_at_most(Duration::from_secs(600));
    let guard = __private::acquire::<LockGuard>(Ok(&a), KEY.into(), &spec)
        .await
        .unwrap();
    let mut finished = false;
    let out = __private::hold(&guard, &spec, async {
        tokio::time::sleep(Duration::from_secs(660)).await;
        finished = true;
    })
    .await;
    assert!(matches!(out, Err(LockError::Lost { .. })), "{out:?}");
    assert!(!finished, "the body ran on past hold_at_most");
    let out: Result<(), LockError> = __private::finish(guard, out.map(Ok)).await.and_then(|r| r);
    assert!(matches!(out, Err(LockError::Lost { .. })));
    assert!(free_for(&b).await);
}

#[tokio::test(start_paused = true)]
async fn a_body_within_hold_at_most_ends_normally_and_nobody_renews_its_lease() {
    let (_store, a, b) = two_processes();
    let spec = hold_at_most(Duration::from_secs(600));
    let start = Instant::now();
    let guard = __private::acquire::<LockGuard>(Ok(&a), KEY.into(), &spec)
        .await
        .unwrap();
    let out = __private::hold(&guard, &spec, async {
        tokio::time::sleep(Duration::from_secs(540)).await;
        7
    })
    .await;
    assert_eq!(out.unwrap(), 7);
    // A process that dies here (the guard forgotten, never released) leaves the lock until
    // start + 600 s, not a moment longer: the lease was never renewed.
    std::mem::forget(guard);
    tokio::time::sleep_until(start + Duration::from_secs(600) - TICK).await;
    assert!(!free_for(&b).await);
    tokio::time::sleep_until(start + Duration::from_secs(600) + TICK).await;
    assert!(free_for(&b).await);
}

#[tokio::test(start_paused = true)]
async fn skip_returns_none_while_the_lock_is_held_elsewhere() {
    let (_store, a, b) = two_processes();
    let spec = spec(None, None, Some(HOLD));
    let start = Instant::now();
    let guard = __private::try_acquire::<LockGuard>(Ok(&a), KEY.into(), &spec)
        .await
        .unwrap()
        .expect("a free lock is taken");
    assert!(
        __private::try_acquire::<LockGuard>(Ok(&b), KEY.into(), &spec)
            .await
            .unwrap()
            .is_none()
    );
    let out: Result<(), LockError> = __private::finish(guard, Ok(Ok(()))).await.and_then(|r| r);
    out.unwrap();
    // Triggered a second later: the hold still keeps the job from running twice.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        __private::try_acquire::<LockGuard>(Ok(&b), KEY.into(), &spec)
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep_until(start + HOLD + TICK).await;
    assert!(
        __private::try_acquire::<LockGuard>(Ok(&b), KEY.into(), &spec)
            .await
            .unwrap()
            .is_some()
    );
}
