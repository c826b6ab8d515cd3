//! Scenario 3: what `#[distributed_lock]` costs over the guard a user would write by hand, 16
//! tasks each, on the same Redis.

use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker};

use crate::measure::cycles_per_sec;
use crate::report::Report;

#[distributed_lock(key = "m:<task>:<i>", locker = locker)]
async fn annotated(locker: &Locker, task: usize, i: u64) -> Result<(), LockError> {
    std::hint::black_box((task, i));
    Ok(())
}

async fn hand_written(locker: &Locker, task: usize, i: u64) -> Result<(), LockError> {
    let guard = locker.lock(format!("h:{task}:{i}")).acquire().await?;
    std::hint::black_box((task, i));
    guard.release().await
}

/// Scenario 3 on the server at `url`, `duration` per side.
pub(crate) async fn scenario(report: &mut Report, url: &str, duration: Duration) {
    let locker = Locker::builder()
        .url(url)
        .prefix("bench")
        .build()
        .await
        .expect("locker");
    let l = locker.clone();
    let by_hand = cycles_per_sec(16, duration, move |t, i| {
        let l = l.clone();
        async move { hand_written(&l, t, i % 16).await.expect("hand-written") }
    })
    .await;
    let l = locker.clone();
    let attribute = cycles_per_sec(16, duration, move |t, i| {
        let l = l.clone();
        async move { annotated(&l, t, i % 16).await.expect("annotated") }
    })
    .await;
    report.add(
        "3 attribute overhead, 16 tasks",
        "calls/s",
        attribute,
        by_hand,
        "hand-written guard",
        "calls/s",
    );
}
