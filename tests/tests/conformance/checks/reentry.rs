//! 8. Re-entry follows the holder's scope, not the task.

use std::time::Duration;

use leasehold_tests::conformance::Engine;

use super::support::{free_for_another_task, LONG_LEASE};

/// The same task outside the holder's scope is `Busy`; inside it the same key re-enters with
/// the holder's fence, a spawned task does not, and giving the re-entered guard back keeps the
/// lock with the outer guard.
pub async fn follows_the_scope(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let outer = a
        .lock("reentry")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    // The same task outside the holder's scope is another owner: it waits, and is refused.
    let err = a
        .lock("reentry")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
        .expect_err("not re-entrant outside the scope");
    assert!(err.is_busy(), "{err:?}");
    assert!(a.lock("reentry").try_acquire().await.unwrap().is_none());
    outer
        .scope(async {
            let inner = a
                .lock("reentry")
                .wait(Duration::ZERO)
                .acquire()
                .await
                .expect("re-entered inside the holder's scope");
            assert!(inner.is_reentrant());
            assert_eq!(
                inner.fence(),
                outer.fence(),
                "a re-entry is the same holding"
            );
            // A task spawned from the scope does not inherit it.
            assert!(
                !free_for_another_task(&a, "reentry").await,
                "a spawned task re-entered its parent's lock"
            );
            // Giving back the re-entered guard leaves the lock with the outer one.
            inner
                .release()
                .await
                .expect("release of a re-entered guard");
            assert!(outer.is_held());
            assert!(!free_for_another_task(&b, "reentry").await);
        })
        .await;
    let fence = outer.fence();
    outer.release().await.expect("release");
    let next = b
        .lock("reentry")
        .try_acquire()
        .await
        .unwrap()
        .expect("free once the outer guard released it");
    assert!(next.fence() > fence);
    next.release().await.expect("release");
}
