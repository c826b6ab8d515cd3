//! Each fault handle of the kit, under Tokio's paused clock: what the holders see, and what
//! the store hands out next. Order is judged by what the store and the guards report, never
//! by a stopwatch. (Not named `faults`: the tests package's fault suite is, and
//! `--test faults` would run both.)

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_testkit::{faulty, faulty_with};

const LEASE: Duration = Duration::from_secs(9);

#[tokio::test(start_paused = true)]
async fn a_lost_lease_fires_lost_and_frees_the_key() {
    let (locker, faults) = faulty();
    let other = faults.locker();
    let guard = locker.lock("k").lease(LEASE).acquire().await.unwrap();
    assert!(faults.lose("k"));
    assert!(!faults.is_locked("k"));
    let next = other
        .lock("k")
        .try_acquire()
        .await
        .unwrap()
        .expect("the key is free");
    assert!(next.fence() > guard.fence());
    guard.lost().await;
    assert!(!guard.is_held());
    assert!(next.is_held());
    // Nobody holds a key that was never taken.
    assert!(!faults.lose("nobody"));
}

#[tokio::test(start_paused = true)]
async fn a_paused_holder_believes_it_holds_while_another_takes_the_key() {
    let (locker, faults) = faulty();
    let other = faults.locker();
    let paused = locker.lock("k").lease(LEASE).acquire().await.unwrap();
    assert!(faults.pause_holder("k"));
    let next = other.lock("k").wait(LEASE).acquire().await.unwrap();
    assert!(next.fence() > paused.fence());
    assert!(paused.is_held(), "the paused holder does not know yet");
    // Its renewals go unanswered: it learns when its own count of the lease runs out.
    paused.lost().await;
    assert!(!paused.is_held());
    assert!(next.is_held());
}

#[tokio::test(start_paused = true)]
async fn an_outage_refuses_calls_and_a_wait_rides_it_out() {
    let (locker, faults) = faulty();
    faults.engine_down();
    let refused = locker.lock("k").try_acquire().await;
    assert!(
        matches!(refused, Err(LockError::Unavailable { .. })),
        "{refused:?}"
    );
    faults.engine_up();
    // What the refused attempt may have taken is given back in the background first, as
    // after a real outage: a wait (not a try) gets the key.
    let guard = locker
        .lock("k")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    guard.release().await.unwrap();

    faults.engine_down_for(Duration::from_secs(5));
    let refused = locker.lock("k").try_acquire().await;
    assert!(
        matches!(refused, Err(LockError::Unavailable { .. })),
        "{refused:?}"
    );
    let rode_out = locker
        .lock("k")
        .wait(Duration::from_secs(30))
        .retry_unavailable(true)
        .acquire()
        .await;
    assert!(rode_out.is_ok(), "{rode_out:?}");
}

#[tokio::test(start_paused = true)]
async fn a_failover_forgets_leases_and_fences_continue() {
    let (locker, faults) = faulty();
    let other = faults.locker();
    let a = locker.lock("a").lease(LEASE).acquire().await.unwrap();
    let b = locker.lock("b").lease(LEASE).acquire().await.unwrap();
    faults.fail_over();
    let a2 = other
        .lock("a")
        .try_acquire()
        .await
        .unwrap()
        .expect("forgotten");
    let b2 = other
        .lock("b")
        .try_acquire()
        .await
        .unwrap()
        .expect("forgotten");
    assert!(a2.fence() > a.fence() && b2.fence() > b.fence());
    a.lost().await;
    b.lost().await;
}

#[tokio::test(start_paused = true)]
async fn an_expired_permit_is_lost_and_free_again() {
    let (locker, faults) = faulty();
    let first = locker
        .semaphore("pool", 2)
        .lease(LEASE)
        .acquire()
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let second = locker
        .semaphore("pool", 2)
        .lease(LEASE)
        .acquire()
        .await
        .unwrap();
    assert!(locker
        .semaphore("pool", 2)
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(faults.expire_permit("pool"));
    // The permit whose lease ends first: both were renewed alike, so the one taken first.
    let third = locker.semaphore("pool", 2).try_acquire().await.unwrap();
    assert!(third.is_some(), "a permit came free");
    first.lost().await;
    assert!(second.is_held());
    assert!(!faults.expire_permit("no-such-pool"));
}

#[tokio::test(start_paused = true)]
async fn a_deposed_leader_learns_it_and_the_next_term_is_higher() {
    let (locker, faults) = faulty();
    let other = faults.locker();
    let leader = locker.leader("jobs").lease(LEASE).campaign().await.unwrap();
    assert!(faults.depose_leader("jobs"));
    let next = other.leader("jobs").lease(LEASE).campaign().await.unwrap();
    assert!(next.term() > leader.term());
    leader.lost().await;
    assert!(!leader.is_leader());
    assert!(next.is_leader());
}

#[tokio::test(start_paused = true)]
async fn a_forced_release_wakes_the_waiters_at_once() {
    let (locker, faults) = faulty_with(Locker::builder().default_lease(LEASE)).unwrap();
    let other = faults.locker();
    let holder = locker.lock("k").acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        other
            .lock("k")
            .wait(Duration::from_secs(3600))
            .acquire()
            .await
    });
    // On the paused clock: the waiter has found the key taken and waits for its release (the
    // holder's first renewal is due at a third of the lease, later).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let forced = tokio::time::Instant::now();
    assert!(faults.force_release("k"));
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fence() > holder.fence());
    // On the paused clock: woken by the release itself, before any timer of the waiter's
    // (its next retry) fired.
    assert_eq!(tokio::time::Instant::now() - forced, Duration::ZERO);
    holder.lost().await;
}

#[tokio::test(start_paused = true)]
async fn a_delayed_write_lands_while_the_next_holder_holds_the_key() {
    let (locker, faults) = faulty();
    let other = faults.locker();
    let first = locker.lock("k").lease(LEASE).acquire().await.unwrap();
    let next = tokio::spawn(async move {
        let g = other.lock("k").wait(LEASE * 2).acquire().await.unwrap();
        let fence = g.fence();
        (g, fence)
    });
    let seen = faults
        .delay_past_lease("k", async { faults.is_locked("k") })
        .await;
    assert!(seen, "the write ran while another holder held the key");
    let (g, fence) = next.await.unwrap();
    assert!(fence > first.fence());
    assert!(g.is_held());
}

/// A body under `#[distributed_lock]` that waits forever, on `locker`.
#[leasehold::distributed_lock(key = "job:<id>", lease = "9s", locker = locker)]
async fn endless_job(
    locker: &Locker,
    id: u32,
    started: &tokio::sync::Notify,
) -> Result<(), LockError> {
    started.notify_one();
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_lost_lease_cancels_the_attributes_body() {
    let (locker, faults) = faulty();
    let started = tokio::sync::Notify::new();
    let job = endless_job(&locker, 7, &started);
    let lose = async {
        started.notified().await;
        assert!(faults.lose("job:7"));
    };
    // Bounded, so that a body the loss did not cancel fails the test (an hour of the paused
    // clock passes at once).
    let both = tokio::time::timeout(Duration::from_secs(3600), async { tokio::join!(job, lose) });
    let (outcome, ()) = both.await.expect("the loss cancelled the body");
    assert!(
        matches!(outcome, Err(LockError::Lost { .. })),
        "{outcome:?}"
    );
}
