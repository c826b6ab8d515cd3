//! The session-bound primitives of ZooKeeper and etcd when a holder's session ends, written
//! once for both (a permit and a leadership live there as long as the holder's session, a
//! znode's or a lease's): a permit holder's process frozen past its session gives the permit
//! back, and a frozen leader is replaced by a waiting campaigner with a larger term, which an
//! observer sees without polling.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::history::{Run, WorkerSpec};
use tokio::time::{sleep, timeout, Instant};

/// The semaphore, and the election, a worker process holds when it is frozen.
const KEY: &str = "sessions";

/// Added to a session timeout for a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);

/// `spec` for one task of a worker process that holds `KEY` for longer than the scenario.
fn long_holder(spec: &WorkerSpec) -> WorkerSpec {
    spec.clone()
        .keys(&[KEY])
        .tasks(1)
        .hold(Duration::from_secs(30), 1)
        .duration(Duration::from_secs(20))
}

/// Waits until worker `w` of `run` holds, and returns its fence.
async fn held_by(run: &Run, w: usize) -> u64 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let history = run.history();
        if let Some(fence) = history.holds_of(w).find_map(|h| h.fence()) {
            return fence;
        }
        assert!(Instant::now() < until, "the worker never got its hold");
        sleep(Duration::from_millis(20)).await;
    }
}

/// A worker process takes the one permit of a semaphore and is frozen (SIGSTOP): nothing
/// renews or releases the permit, and once the server ended the session (its ephemeral znode,
/// its lease's key go), a waiter of `locker` gets the permit, within the session timeout plus
/// slack of the freeze, with a larger fence.
pub async fn a_frozen_permit_holder_gives_the_permit_back(
    name: &str,
    spec: &WorkerSpec,
    session: Duration,
    locker: &Locker,
) {
    let mut run = Run::new(name);
    let w = run.spawn(&long_holder(spec).semaphore(1));
    let fence = held_by(&run, w).await;
    let info = locker.inspect_semaphore(KEY).await.unwrap();
    assert_eq!((info.limit, info.in_use()), (Some(1), 1), "{info:?}");
    let taken = locker.semaphore(KEY, 1).try_acquire().await.unwrap();
    assert!(taken.is_none(), "a second holder of one permit");
    run.pause(w);
    let frozen = Instant::now();
    let permit = locker
        .semaphore(KEY, 1)
        .lease(session)
        .wait(session * 3 + SLACK)
        .acquire()
        .await
        .expect("the frozen holder's permit comes back when its session ends");
    let took = frozen.elapsed();
    assert!(
        took < session + SLACK,
        "the permit came back after {took:?}"
    );
    assert!(permit.fence() > fence, "{} <= {fence}", permit.fence());
    run.resume(w);
    run.kill9(w);
    permit.release().await.unwrap();
}

/// A worker process leads an election and is frozen while two campaigners wait (of
/// `lockers[0]` and `lockers[1]`, as two processes): once the server ended its session, the
/// first of them leads with a larger term, and an observer of `lockers[2]` subscribed before,
/// that polls only every 30 s, sees it within slack of its
/// election: the record written on the new leader's contender wakes it (with another
/// campaigner behind the leader, a watch of the last writer alone would not).
pub async fn a_frozen_leader_is_replaced_with_a_larger_term_and_observed(
    name: &str,
    spec: &WorkerSpec,
    session: Duration,
    lockers: &[Locker; 3],
) {
    let mut run = Run::new(name);
    let w = run.spawn(&long_holder(spec).leader());
    let term = held_by(&run, w).await;
    let campaign = |identity: &'static str, locker: &Locker| {
        let locker = locker.clone();
        tokio::spawn(async move {
            let leadership = locker
                .leader(KEY)
                .identity(identity)
                .lease(session)
                .campaign()
                .await;
            (Instant::now(), leadership)
        })
    };
    let next = campaign("next", &lockers[0]);
    sleep(Duration::from_millis(200)).await;
    let after = campaign("after", &lockers[1]);
    sleep(Duration::from_millis(300)).await;
    assert!(!next.is_finished() && !after.is_finished(), "two leaders");
    // Subscribed with both campaigners queued behind the leader.
    let mut observer = lockers[2]
        .observe_leader(KEY)
        .unwrap()
        .poll_every(Duration::from_secs(30));
    let first = timeout(SLACK, observer.next())
        .await
        .expect("the observer answers")
        .unwrap()
        .expect("the worker leads");
    assert_eq!(first.term(), term);
    // The observer waits from before the change: only a wake-up can tell it in time.
    let watching = tokio::spawn(async move {
        loop {
            match observer.next().await {
                Ok(Some(leader)) if leader.identity() == "next" => return (Instant::now(), leader),
                Ok(_) => continue,
                Err(e) => panic!("the observer failed: {e}"),
            }
        }
    });
    run.pause(w);
    let frozen = Instant::now();
    let (elected, leadership) = timeout(session * 3 + SLACK, next)
        .await
        .expect("the next campaigner is elected when the frozen leader's session ends")
        .unwrap();
    let leadership = leadership.unwrap();
    let took = elected - frozen;
    assert!(took < session + SLACK, "elected {took:?} after the freeze");
    assert!(leadership.term() > term, "terms strictly increase");
    let (seen_at, seen) = timeout(SLACK, watching)
        .await
        .expect("the observer was woken by the new leader's record")
        .unwrap();
    assert!(
        seen_at - elected < SLACK,
        "the observer saw the new leader {:?} after its election",
        seen_at - elected
    );
    assert_eq!(
        (seen.identity(), seen.term()),
        ("next", leadership.term()),
        "the observer sees the new leader"
    );
    assert!(!after.is_finished(), "two leaders");
    run.resume(w);
    run.kill9(w);
    leadership.resign().await.unwrap();
    let (_, last) = timeout(SLACK, after)
        .await
        .expect("the last campaigner")
        .unwrap();
    let last = last.unwrap();
    assert!(last.term() > seen.term());
    last.resign().await.unwrap();
}
