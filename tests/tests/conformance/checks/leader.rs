//! Property 13, leader election: across three lockers (as three processes would be) one
//! leader at a time, terms strictly increasing, a resign hands over to a waiting campaigner,
//! followers observe every change (the latest state at least, terms never backwards), and a
//! dropped campaign leaves nothing behind. Every engine has leader election.

use std::time::Duration;

use leasehold::{Leader, LeaderObserver};
use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, timeout};

use super::support::{HANDOVER, LONG_LEASE, SLACK};

const NAME: &str = "conformance:scheduler";

/// The next state an observer reports, within [`HANDOVER`] plus slack.
async fn observed(observer: &mut LeaderObserver) -> Option<Leader> {
    timeout(HANDOVER + SLACK, observer.next())
        .await
        .expect("the observer saw the change in time")
        .expect("the observer read the record")
}

pub async fn one_leader_terms_increase_followers_observe(engine: &Engine) {
    let lockers = [
        engine.locker().await,
        engine.locker().await,
        engine.locker().await,
    ];
    let mut follower = lockers[2].observe_leader(NAME).unwrap();
    assert_eq!(observed(&mut follower).await, None, "nobody leads yet");

    let first = lockers[0]
        .leader(NAME)
        .identity("p0")
        .lease(LONG_LEASE)
        .campaign()
        .await
        .unwrap();
    let seen = observed(&mut follower).await.expect("p0 leads");
    assert_eq!((seen.identity(), seen.term()), ("p0", first.term()));

    // Two campaigners wait; neither is elected while p0 leads.
    let mut waiting = Vec::new();
    for (i, locker) in lockers.iter().enumerate().skip(1) {
        let locker = locker.clone();
        waiting.push(tokio::spawn(async move {
            locker
                .leader(NAME)
                .identity(format!("p{i}"))
                .lease(LONG_LEASE)
                .campaign()
                .await
        }));
    }
    sleep(Duration::from_millis(300)).await;
    assert!(waiting.iter().all(|t| !t.is_finished()), "two leaders");
    assert!(first.is_leader());

    // A dropped campaign leaves no place in the queue: it never blocks the others.
    let dropped = timeout(
        Duration::from_millis(200),
        lockers[0].leader(NAME).identity("dropped").campaign(),
    )
    .await;
    assert!(dropped.is_err(), "elected while p0 leads");

    let mut last = first.term();
    first.resign().await.unwrap();
    for round in 0..2 {
        // Whoever comes next, it is one of the waiting two, with a greater term, and the
        // follower sees it (perhaps after seeing nobody lead for a moment).
        let (done, _, rest) = timeout(
            HANDOVER + SLACK,
            futures_select(std::mem::take(&mut waiting)),
        )
        .await
        .unwrap_or_else(|_| panic!("round {round}: nobody was elected after a resign"));
        waiting = rest;
        let next = done.unwrap();
        assert!(next.is_leader());
        assert!(next.term() > last, "terms strictly increase");
        sleep(Duration::from_millis(100)).await;
        assert!(waiting.iter().all(|t| !t.is_finished()), "two leaders");
        let mut seen = observed(&mut follower).await;
        if seen.is_none() {
            seen = observed(&mut follower).await;
        }
        let seen = seen.expect("the new leader is observed");
        assert_eq!(
            (seen.identity(), seen.term()),
            (next.identity(), next.term())
        );
        assert!(seen.term() > last, "followers never see terms go back");
        last = next.term();
        next.resign().await.unwrap();
    }
    assert_eq!(
        observed(&mut follower).await,
        None,
        "the last leader resigned"
    );
}

/// Waits for the first of `tasks` to finish: its output, its index, and the others.
async fn futures_select<T: Send + 'static>(
    mut tasks: Vec<tokio::task::JoinHandle<T>>,
) -> (T, usize, Vec<tokio::task::JoinHandle<T>>) {
    loop {
        if let Some(i) = tasks.iter().position(|t| t.is_finished()) {
            let task = tasks.remove(i);
            return (task.await.expect("the campaign task"), i, tasks);
        }
        sleep(Duration::from_millis(5)).await;
    }
}
