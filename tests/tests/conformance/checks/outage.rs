//! Property 22: waiting rides out an outage: an acquire that waits keeps trying an engine that stopped
//! answering (every server stalled, as a partition would) for as long as its wait lasts, and
//! takes the lock once the engine answers again; one told not to retry fails at once.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

use super::support::{bounded, SLACK};

/// Longer than the ~3 s after which a waiting acquire used to give up in an outage.
const OUTAGE: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_secs(40);

pub async fn ridden_out(engine: &Engine) {
    let locker = engine.locker().await;
    // Connected and warm, as a service is when the outage starts.
    let warm = locker
        .lock("outage-warm")
        .acquire()
        .await
        .expect("a free lock");
    warm.release().await.expect("released");

    assert!(engine.stall());
    let started = Instant::now();
    let waiting = tokio::spawn({
        let locker = locker.clone();
        async move { locker.lock("outage").wait(WAIT).acquire().await }
    });
    sleep(OUTAGE).await;
    assert!(
        !waiting.is_finished(),
        "{}: the waiting acquire ended {:?} into the outage: {:?}",
        engine.kind(),
        started.elapsed(),
        waiting.await
    );
    engine.heal();
    let guard = bounded("an acquire after the outage", WAIT, waiting)
        .await
        .expect("the task")
        .expect("the waiting acquire takes the lock once the engine answers again");
    eprintln!(
        "{}: acquired {:?} after an outage of {OUTAGE:?}",
        engine.kind(),
        started.elapsed()
    );
    assert!(guard.is_held());
    guard.release().await.expect("released");

    // Told not to retry, the first unavailable answer ends the wait.
    assert!(engine.stall());
    let started = Instant::now();
    let refused = bounded(
        "an acquire that does not retry",
        engine.acquire_bound(Duration::ZERO) + SLACK,
        locker
            .lock("outage-no-retry")
            .wait(WAIT)
            .retry_unavailable(false)
            .acquire(),
    )
    .await;
    let err = refused.expect_err("no lock from a stalled engine");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(started.elapsed() < WAIT / 2, "{:?}", started.elapsed());
    engine.heal();
    let after = locker
        .lock("outage-after")
        .wait(WAIT)
        .acquire()
        .await
        .expect("the engine serves again");
    after.release().await.expect("released");
}
