//! 7. A lock is given back on every path out of its holder.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::sync::oneshot;
use tokio::time::{sleep, Instant};

use super::support::{assert_taken_soon, CONTENDER_WAIT, LONG_LEASE};

/// A guard dropped, held by a task that panics, or by a task that is aborted, frees the lock
/// for another locker within `HANDOVER` (its lease is [`LONG_LEASE`]); so does the release
/// of a holder whose waiter was aborted mid-wait.
pub async fn on_drop_panic_and_abort(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;

    let guard = a
        .lock("drop")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let dropped = Instant::now();
    drop(guard);
    assert_taken_soon(&b, "drop", dropped, "drop").await;

    let (holding, held) = oneshot::channel();
    let locker = a.clone();
    let panicking = tokio::spawn(async move {
        let _guard = locker
            .lock("panic")
            .lease(LONG_LEASE)
            .acquire()
            .await
            .expect("a free lock");
        holding.send(()).unwrap();
        panic!("the holder panics (on purpose)");
    });
    held.await.expect("the task took the lock");
    assert!(panicking.await.expect_err("it panicked").is_panic());
    assert_taken_soon(&b, "panic", Instant::now(), "panic").await;

    let (holding, held) = oneshot::channel();
    let locker = a.clone();
    let aborted = tokio::spawn(async move {
        let _guard = locker
            .lock("abort")
            .lease(LONG_LEASE)
            .acquire()
            .await
            .expect("a free lock");
        holding.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    held.await.expect("the task took the lock");
    aborted.abort();
    assert!(aborted.await.expect_err("it was aborted").is_cancelled());
    assert_taken_soon(&b, "abort", Instant::now(), "abort").await;

    // A waiter aborted mid-wait leaves no lock, turn or queue entry behind.
    let holder = b
        .lock("abort-waiter")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let locker = a.clone();
    let waiter = tokio::spawn(async move {
        locker
            .lock("abort-waiter")
            .lease(LONG_LEASE)
            .wait(CONTENDER_WAIT)
            .acquire()
            .await
    });
    sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter returned while the lock was held"
    );
    waiter.abort();
    assert!(waiter.await.expect_err("it was aborted").is_cancelled());
    holder.release().await.expect("release");
    assert_taken_soon(
        &a,
        "abort-waiter",
        Instant::now(),
        "release after an aborted waiter",
    )
    .await;
}
