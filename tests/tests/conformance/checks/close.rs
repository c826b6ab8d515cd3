//! Property 24: a locker that closes: `Locker::close` gives back every lease the locker holds (a lock,
//! and where the engine has them a reader's share, semaphore permits and a leadership), so
//! that another locker waiting for each gets it at once instead of after the lease, and
//! refuses new calls with `LockError::Closed`.

use std::time::Duration;

use leasehold::{LockError, LostReason};
use leasehold_tests::conformance::Engine;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use super::support::{HANDOVER, LONG_LEASE};

const WAIT: Duration = Duration::from_secs(30);

pub async fn gives_everything_back(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let caps = a.capabilities();
    let lock = a
        .lock("close:lock")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let mut waiting: Vec<(&str, JoinHandle<Result<(), LockError>>)> = Vec::new();
    let b2 = b.clone();
    waiting.push((
        "lock",
        tokio::spawn(async move { b2.lock("close:lock").wait(WAIT).acquire().await.map(drop) }),
    ));
    let mut held = 1;
    let _read = if caps.read_locks {
        held += 1;
        let read = a
            .read_lock("close:rw")
            .lease(LONG_LEASE)
            .acquire()
            .await
            .unwrap();
        let b = b.clone();
        waiting.push((
            "write after a read",
            tokio::spawn(async move {
                b.write_lock("close:rw")
                    .wait(WAIT)
                    .acquire()
                    .await
                    .map(drop)
            }),
        ));
        Some(read)
    } else {
        None
    };
    let _permit = if caps.semaphores {
        held += 1;
        let permit = a
            .semaphore("close:sem", 1)
            .lease(LONG_LEASE)
            .acquire()
            .await
            .unwrap();
        let b = b.clone();
        waiting.push((
            "permit",
            tokio::spawn(async move {
                b.semaphore("close:sem", 1)
                    .wait(WAIT)
                    .acquire()
                    .await
                    .map(drop)
            }),
        ));
        Some(permit)
    } else {
        None
    };
    let _leadership = if caps.leader_election {
        held += 1;
        let leadership = a
            .leader("close:leader")
            .identity("a")
            .lease(LONG_LEASE)
            .campaign()
            .await
            .unwrap();
        let b = b.clone();
        waiting.push((
            "leadership",
            tokio::spawn(async move {
                b.leader("close:leader")
                    .identity("b")
                    .wait(WAIT)
                    .campaign()
                    .await
                    .map(drop)
            }),
        ));
        Some(leadership)
    } else {
        None
    };
    // Everyone queued behind a's leases.
    sleep(Duration::from_millis(500)).await;
    for (what, task) in &waiting {
        assert!(
            !task.is_finished(),
            "{}: the {what} waiter finished early",
            engine.kind()
        );
    }

    let started = Instant::now();
    let report = a.close().await;
    assert_eq!(report.released, held, "{}: {report:?}", engine.kind());
    assert_eq!(report.unconfirmed, 0, "{}: {report:?}", engine.kind());
    assert!(report.drained, "{}: {report:?}", engine.kind());
    for (what, task) in waiting {
        tokio::time::timeout(HANDOVER, task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{}: the {what} waiter still waits after close",
                    engine.kind()
                )
            })
            .unwrap()
            .unwrap_or_else(|e| panic!("{}: the {what} waiter failed: {e}", engine.kind()));
    }
    eprintln!(
        "{}: close gave back {held} leases; every waiter got in within {:?}",
        engine.kind(),
        started.elapsed()
    );
    assert!(!lock.is_held());
    let err = lock.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::Lost {
                reason: LostReason::Closed
            }
        ),
        "{err:?}"
    );
    let err = a.lock("close:new").acquire().await.unwrap_err();
    assert!(matches!(err, LockError::Closed), "{err:?}");
    assert!(err.to_string().contains("closed"), "{err}");
}

/// Memory's lockers share no store (each `in_memory` locker is its own engine): closing one
/// gives back its leases, ends the waits of its own tasks with `Closed` at once, and refuses
/// new calls.
pub async fn in_process(engine: &Engine) {
    let a = engine.locker().await;
    let lock = a
        .lock("close:lock")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let read = a
        .read_lock("close:rw")
        .lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let permit = a
        .semaphore("close:sem", 1)
        .lease(LONG_LEASE)
        .acquire()
        .await
        .unwrap();
    let waiters = [
        tokio::spawn({
            let a = a.clone();
            async move { a.lock("close:lock").wait(WAIT).acquire().await.map(drop) }
        }),
        tokio::spawn({
            let a = a.clone();
            async move {
                a.write_lock("close:rw")
                    .wait(WAIT)
                    .acquire()
                    .await
                    .map(drop)
            }
        }),
        tokio::spawn({
            let a = a.clone();
            async move {
                a.semaphore("close:sem", 1)
                    .wait(WAIT)
                    .acquire()
                    .await
                    .map(drop)
            }
        }),
    ];
    sleep(Duration::from_millis(200)).await;
    let report = a.close().await;
    assert_eq!((report.released, report.unconfirmed), (3, 0), "{report:?}");
    for waiter in waiters {
        let ended = tokio::time::timeout(HANDOVER, waiter)
            .await
            .expect("a wait outlived close");
        assert!(matches!(ended.unwrap(), Err(LockError::Closed)));
    }
    assert!(!lock.is_held() && !read.is_held() && !permit.is_held());
    let err = a.lock("close:new").try_acquire().await.unwrap_err();
    assert!(matches!(err, LockError::Closed), "{err:?}");
}
