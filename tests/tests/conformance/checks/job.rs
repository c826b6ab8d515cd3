//! Property 15, singleton jobs: three lockers trigger the same job at once; exactly one runs it (the
//! others' `try_acquire` finds it taken and skips), and `hold_at_least` keeps the lock taken
//! after the job ended early, so a trigger a moment later skips too; once the hold is over,
//! the next trigger runs, with a greater fence.

use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::Instant;

const HOLD: Duration = Duration::from_millis(1_500);

pub async fn runs_once_and_holds(engine: &Engine) {
    let lockers = [
        engine.locker().await,
        engine.locker().await,
        engine.locker().await,
    ];
    let key = "job:nightly";
    let triggered = Instant::now();
    let (a, b, c) = tokio::join!(
        lockers[0].lock(key).hold_at_least(HOLD).try_acquire(),
        lockers[1].lock(key).hold_at_least(HOLD).try_acquire(),
        lockers[2].lock(key).hold_at_least(HOLD).try_acquire(),
    );
    let outcomes = [a, b, c];
    let mut ran = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        if let Some(guard) = outcome.expect("try_acquire answers") {
            ran.push((i, guard));
        }
    }
    assert_eq!(ran.len(), 1, "{} of 3 triggers ran the job", ran.len());
    let (winner, guard) = ran.pop().expect("one ran");
    let fence = guard.fence();
    // The job is done at once; the lock stays taken for the rest of the hold.
    guard.release().await.expect("release");
    for (i, locker) in lockers.iter().enumerate() {
        let again = locker.lock(key).try_acquire().await.expect("answers");
        if triggered.elapsed() < HOLD {
            assert!(
                again.is_none(),
                "locker {i} (winner {winner}) ran the job again {:?} after the trigger, \
                 within the hold",
                triggered.elapsed()
            );
        }
    }
    // After the hold, the next trigger runs.
    let next = &lockers[(winner + 1) % 3];
    let later = loop {
        if let Some(guard) = next.lock(key).try_acquire().await.expect("answers") {
            break guard;
        }
        assert!(
            triggered.elapsed() < HOLD * 4,
            "the lock was still taken {:?} after the trigger (hold {HOLD:?})",
            triggered.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        triggered.elapsed() >= HOLD,
        "the lock was free {:?} after the trigger, before the hold of {HOLD:?} was over",
        triggered.elapsed()
    );
    assert!(later.fence() > fence, "fences go up across runs");
    later.release().await.expect("release");
}
