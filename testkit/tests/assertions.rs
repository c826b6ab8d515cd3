//! `assert_held!` and `Witness`: what they accept, and what they report when the lock is not
//! held (outside the holder's scope, in a sibling task, after the lease was lost).

use std::time::Duration;

use leasehold::Locker;
use leasehold_testkit::{assert_held, faulty, Witness};

#[tokio::test]
async fn assert_held_gives_the_fence_inside_the_scope_and_on_the_global_default() {
    let locker = Locker::in_memory();
    leasehold::set_global_default(locker.clone()).unwrap();
    let guard = locker.lock("k").acquire().await.unwrap();
    let (explicit, by_default) = guard
        .scope(async { (assert_held!(locker, "k"), assert_held!("k")) })
        .await;
    assert_eq!((explicit, by_default), (guard.fence(), guard.fence()));
}

#[tokio::test]
#[should_panic(expected = "`k` is not held here")]
async fn assert_held_panics_outside_the_scope() {
    let locker = Locker::in_memory();
    let _guard = locker.lock("k").acquire().await.unwrap();
    assert_held!(locker, "k");
}

#[tokio::test]
async fn a_sibling_task_does_not_hold_the_key() {
    let locker = Locker::in_memory();
    let guard = locker.lock("k").acquire().await.unwrap();
    let witness = Witness::new(&locker, "k");
    let sibling = tokio::spawn({
        let witness = witness.clone();
        async move { witness.here() }
    });
    guard
        .scope(async {
            sibling.await.unwrap();
            witness.here();
        })
        .await;
    assert_eq!(witness.unheld_calls(), vec![0]);
    assert_eq!(witness.fences(), vec![None, Some(guard.fence())]);
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_is_not_held_any_more() {
    let (locker, faults) = faulty();
    let guard = locker
        .lock("k")
        .lease(Duration::from_secs(9))
        .acquire()
        .await
        .unwrap();
    let witness = Witness::new(&locker, "k");
    guard
        .scope(async {
            witness.here();
            faults.lose("k");
            guard.lost().await;
            witness.here();
        })
        .await;
    assert_eq!(witness.unheld_calls(), vec![1]);
    let message = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        witness.assert_always_held()
    }))
    .unwrap_err()
    .downcast::<String>()
    .unwrap();
    assert!(
        message.contains("1 of 2 call(s) ran without holding `k` (calls [1]"),
        "{message}"
    );
}

#[test]
#[should_panic(expected = "the witness of `k` was never called")]
fn a_witness_never_called_fails() {
    Witness::new(&Locker::in_memory(), "k").assert_always_held();
}
