//! Property 16, cancellation at every await point: an acquire, a `try_acquire`, a waiting acquire and a
//! release, each dropped after its N-th poll for N = 1, 2, 3, … until it finishes by itself,
//! leave the lock free for another locker within [`FREED_WITHIN`]. A call that was sent before
//! the drop may still land in the engine (another pooled connection, a slow server): whatever
//! it took must be given back after it landed, not before.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::conformance::{Engine, OP_TIMEOUT};
use leasehold_tests::polls::for_polls;
use tokio::time::Instant;

use super::support::{CONTENDER_WAIT, HANDOVER, LONG_LEASE};

/// How soon a lock is free again after a call on it was dropped: the dropped call settles
/// within the operation timeout, and the give-back takes a round trip. Well below the holder's
/// lease ([`LONG_LEASE`], 4 s on ZooKeeper and etcd), so a lock left to expire fails.
const FREED_WITHIN: Duration = Duration::from_millis(OP_TIMEOUT.as_millis() as u64 + 2_000);

/// More polls than any call here takes on an idle engine: the loop ends when the call
/// finishes by itself, and this bounds it if it never does.
const MOST_POLLS: usize = 400;

/// How long the dropped waiters wait: short, so that the loop over their polls ends soon.
const WAITER_WAIT: Duration = Duration::from_millis(1500);

/// Fails unless `other` takes `key` within [`FREED_WITHIN`] (and gives it back).
async fn assert_free(other: &Locker, key: &str, what: &str) {
    let start = Instant::now();
    let guard = other
        .lock(key)
        .lease(LONG_LEASE)
        .wait(FREED_WITHIN)
        .acquire()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{what}: the lock was not free {:?} later: {e}",
                start.elapsed()
            )
        });
    guard.release().await.expect("release");
}

/// Exclusive locks: acquire, `try_acquire`, a waiting acquire and a release, each dropped
/// after every number of polls.
pub async fn at_every_poll(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;

    for (n, name) in [(0, "acquire"), (1, "try_acquire")] {
        let mut finished = false;
        for polls in 1..=MOST_POLLS {
            let key = format!("cancel:{name}:{polls}");
            let request = a.lock(key.clone()).lease(LONG_LEASE);
            let out = if n == 0 {
                for_polls(polls, request.acquire()).await.map(|r| r.ok())
            } else {
                for_polls(polls, request.try_acquire())
                    .await
                    .map(|r| r.ok().flatten())
            };
            if let Some(guard) = out {
                guard
                    .unwrap_or_else(|| panic!("{name} of a free lock failed"))
                    .release()
                    .await
                    .expect("release");
                finished = true;
                break;
            }
            assert_free(&b, &key, &format!("{name} dropped after {polls} polls")).await;
        }
        assert!(finished, "{name} did not finish within {MOST_POLLS} polls");
    }

    // A release dropped after every number of polls: the lock is still given back.
    let mut finished = false;
    for polls in 1..=MOST_POLLS {
        let key = format!("cancel:release:{polls}");
        let guard = a
            .lock(key.clone())
            .lease(LONG_LEASE)
            .acquire()
            .await
            .expect("a free lock");
        if for_polls(polls, guard.release()).await.is_some() {
            finished = true;
            break;
        }
        assert_free(&b, &key, &format!("release dropped after {polls} polls")).await;
    }
    assert!(finished, "release did not finish within {MOST_POLLS} polls");

    // A waiter dropped after every number of polls (while another locker holds the lock)
    // leaves nothing that delays the next owner after the holder's release; the loop ends
    // when the waiter's wait runs out before its N-th poll.
    let mut finished = false;
    for polls in 1..=MOST_POLLS {
        let key = format!("cancel:waiter:{polls}");
        let holder = b
            .lock(key.clone())
            .lease(LONG_LEASE)
            .acquire()
            .await
            .expect("a free lock");
        // In a task of its own: in the holder's task, memory's one locker would re-enter.
        let (locker, waiter_key) = (a.clone(), key.clone());
        let waiter = tokio::spawn(async move {
            let request = locker.lock(waiter_key).lease(LONG_LEASE).wait(WAITER_WAIT);
            for_polls(polls, request.acquire())
                .await
                .map(|r| r.map(|g| g.fence()))
        });
        let waited = waiter.await.expect("the waiter's task");
        holder.release().await.expect("release");
        let released = Instant::now();
        let c = engine.locker().await;
        let guard = c
            .lock(key.clone())
            .lease(LONG_LEASE)
            .wait(CONTENDER_WAIT)
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("after a waiter dropped at poll {polls}: {e}"));
        let took = released.elapsed();
        assert!(
            took < HANDOVER,
            "a waiter dropped at poll {polls} delayed the next owner by {took:?}"
        );
        guard.release().await.expect("release");
        match waited {
            None => {}
            Some(Err(leasehold::LockError::Busy { .. })) => {
                finished = true;
                break;
            }
            Some(other) => panic!("a waiter for a held lock ended with {other:?}"),
        }
    }
    assert!(
        finished,
        "a waiter did not give up within {MOST_POLLS} polls"
    );
}

/// Read locks: an acquire dropped after every number of polls leaves nothing that keeps a
/// writer out.
pub async fn reads_at_every_poll(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;

    let mut finished = false;
    for polls in 1..=MOST_POLLS {
        let key = format!("cancel:read:{polls}");
        let out = for_polls(polls, a.read_lock(key.clone()).lease(LONG_LEASE).acquire()).await;
        if let Some(guard) = out {
            guard.expect("a free read lock").release().await.unwrap();
            finished = true;
            break;
        }
        assert_free(
            &b,
            &key,
            &format!("read acquire dropped after {polls} polls"),
        )
        .await;
    }
    assert!(
        finished,
        "a read acquire did not finish within {MOST_POLLS} polls"
    );
}

/// Semaphore permits: an acquire dropped after every number of polls leaves no permit taken.
pub async fn permits_at_every_poll(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let mut finished = false;
    for polls in 1..=MOST_POLLS {
        let key = format!("cancel:permits:{polls}");
        let out = for_polls(
            polls,
            a.semaphore(key.clone(), 2).lease(LONG_LEASE).acquire(),
        )
        .await;
        if let Some(guard) = out {
            guard.expect("a free permit").release().await.unwrap();
            finished = true;
            break;
        }
        let start = Instant::now();
        let all = b
            .semaphore(key.clone(), 2)
            .lease(LONG_LEASE)
            .wait(FREED_WITHIN)
            .acquire_many(2)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "a permit acquire dropped after {polls} polls kept a permit {:?}: {e}",
                    start.elapsed()
                )
            });
        all.release().await.unwrap();
    }
    assert!(
        finished,
        "a permit acquire did not finish within {MOST_POLLS} polls"
    );
}
