//! Property 12, read-write locks: readers share across lockers (three clients, as three processes
//! would be), a writer excludes everyone and waits readers out, a waiting writer holds new
//! readers back, and one that left without the lock (`Busy`, cancelled) none, readers' fences
//! are at least the last writer's, a reader that crashed frees its share after its lease, and
//! a mixed load never lets a writer overlap anyone. Every engine has read locks.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

use super::support::{unless_unanswered, CONTENDER_WAIT, HANDOVER};

const LONG: Duration = Duration::from_secs(10);

pub async fn readers_share_writers_exclude(engine: &Engine) {
    let lockers = [
        engine.locker().await,
        engine.locker().await,
        engine.locker().await,
    ];
    let key = "rw:doc";
    let r1 = lockers[0].read_lock(key).acquire().await.unwrap();
    let r2 = lockers[1].read_lock(key).acquire().await.unwrap();
    assert!(r1.is_held() && r2.is_held(), "readers of two lockers share");
    assert!(
        lockers[2]
            .write_lock(key)
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a writer while readers hold"
    );
    let writer = {
        let locker = lockers[2].clone();
        tokio::spawn(async move {
            let guard = locker.write_lock(key).wait(LONG).acquire().await;
            (Instant::now(), guard)
        })
    };
    sleep(Duration::from_millis(300)).await;
    assert!(
        lockers[0]
            .read_lock(key)
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a new reader passed a waiting writer"
    );
    let late = {
        let locker = lockers[1].clone();
        tokio::spawn(async move {
            let guard = locker.read_lock(key).wait(LONG).acquire().await;
            (Instant::now(), guard)
        })
    };
    sleep(Duration::from_millis(100)).await;
    r1.release().await.unwrap();
    sleep(Duration::from_millis(100)).await;
    assert!(
        !writer.is_finished(),
        "the writer got in with a reader inside"
    );
    let readers_gone = Instant::now();
    r2.release().await.unwrap();
    let (got, w) = writer.await.unwrap();
    let w = w.expect("the writer gets the lock once the readers left");
    assert!(got >= readers_gone);
    sleep(Duration::from_millis(200)).await;
    assert!(
        !late.is_finished(),
        "a reader got in with the writer inside"
    );
    let fence = w.fence();
    let writer_gone = Instant::now();
    w.release().await.unwrap();
    let (got, r) = late.await.unwrap();
    let r = r.expect("the late reader gets in after the writer");
    assert!(got >= writer_gone);
    assert!(r.fence() >= fence, "a reader sees the last writer's fence");
    r.release().await.unwrap();

    // A reader that crashed (nothing renews it, nothing releases it) frees its share after
    // its lease.
    let lease = Duration::from_secs(1);
    let crashed = lockers[0]
        .read_lock(key)
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    std::mem::forget(crashed);
    let start = Instant::now();
    let w = lockers[2]
        .write_lock(key)
        .wait(LONG)
        .acquire()
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(waited <= lease + Duration::from_secs(2), "{waited:?}");
    w.release().await.unwrap();

    writers_that_left_hold_no_reader_back(engine, &lockers).await;
    readers_see_the_fences_handed_over_before_them(engine, &lockers).await;
    mixed_load(engine, &lockers).await;
}

/// A reader's fence is at or above every fence a writer had been given before it, those a
/// writer that waited handed on to its own process's tasks included (issue 46). Locker B's
/// writer queues in the store behind A's while no other task of B waits (the attempt that
/// queues it reserves one fence); two more tasks of B then queue behind it in B, so the
/// attempt that is granted once A leaves reserves three, and B's three tasks get them one
/// after the other. On ZooKeeper the reader after them got the first of the three (writers
/// 321, 322, 323, the reader 321): the waiting znode's fence record, written by the attempt
/// that created it, was never raised.
async fn readers_see_the_fences_handed_over_before_them(
    engine: &Engine,
    lockers: &[leasehold::Locker; 3],
) {
    let key = "rw:handed-over";
    let first = lockers[0].write_lock(key).acquire().await.unwrap();
    let mut given = vec![first.fence()];
    let front = tokio::spawn(write_once(lockers[1].clone(), key));
    // In the store's queue before anything else of B waits: as the store shows it.
    queued_in_the_store(&lockers[2], key).await;
    // Behind it in B: a task takes its place in its locker's queue on its first poll.
    let mut second = Box::pin(write_once(lockers[1].clone(), key));
    let mut third = Box::pin(write_once(lockers[1].clone(), key));
    assert!(poll_once(&mut second).await.is_pending());
    assert!(poll_once(&mut third).await.is_pending());
    let (second, third, ()) = tokio::join!(second, third, async {
        first.release().await.unwrap();
    });
    given.extend([front.await.unwrap(), second, third]);
    let reader = lockers[2]
        .read_lock(key)
        .wait(LONG)
        .acquire()
        .await
        .unwrap();
    let highest = given.iter().copied().max().unwrap();
    assert!(
        reader.fence() >= highest,
        "on {}, writers were given the fences {given:?}, and a reader after them {}",
        engine.kind(),
        reader.fence()
    );
    reader.release().await.unwrap();
}

/// Takes the write lock of `key` through `locker`, and gives it back at once: its fence.
async fn write_once(locker: leasehold::Locker, key: &'static str) -> u64 {
    let guard = locker.write_lock(key).wait(LONG).acquire().await.unwrap();
    let fence = guard.fence();
    guard.release().await.unwrap();
    fence
}

/// Returns once the store shows a process waiting for `key`; at once where the engine cannot
/// be inspected through a locker (memory, RedLock).
async fn queued_in_the_store(locker: &leasehold::Locker, key: &str) {
    let until = Instant::now() + LONG;
    loop {
        match locker.inspect(key).await {
            Ok(info) if info.waiting_processes > 0 => return,
            Ok(_) => {}
            Err(LockError::Config { .. }) => return,
            Err(e) => panic!("inspect: {e}"),
        }
        assert!(Instant::now() < until, "no waiter of {key} in the store");
        sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `future` once.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx)))
        .await
}

/// A writer waiting for a reader leaves without the lock, by its wait running out (`Busy`)
/// and by its acquire being dropped (cancelled); each time a new reader of another locker
/// gets in at once: the writer's wait held new readers back only while it waited.
async fn writers_that_left_hold_no_reader_back(engine: &Engine, lockers: &[leasehold::Locker; 3]) {
    let key = "rw:left";
    let inside = lockers[0]
        .read_lock(key)
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    for cancelled in [false, true] {
        let how = if cancelled { "cancelled" } else { "Busy" };
        if cancelled {
            let outcome = tokio::time::timeout(
                Duration::from_millis(300),
                lockers[2].write_lock(key).wait(LONG).acquire(),
            )
            .await;
            assert!(
                outcome.is_err(),
                "the writer got in past a reader: {outcome:?}"
            );
        } else {
            let outcome = lockers[2]
                .write_lock(key)
                .wait(Duration::from_millis(300))
                .acquire()
                .await;
            assert!(
                matches!(outcome, Err(LockError::Busy { .. })),
                "{outcome:?}"
            );
        }
        // Past the reader's first renewals: the lock stays read-held throughout.
        sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        let reader = lockers[1].read_lock(key).wait(LONG).acquire().await;
        let took = start.elapsed();
        eprintln!(
            "{}: {how}: a new reader got in after {took:?}",
            engine.kind()
        );
        let reader =
            reader.unwrap_or_else(|e| panic!("a new reader after a writer left ({how}): {e}"));
        assert!(
            took < Duration::from_millis(700),
            "on {}, a new reader waited {took:?} behind a writer that had left ({how})",
            engine.kind()
        );
        reader.release().await.unwrap();
        assert!(inside.is_held());
    }
    inside.release().await.unwrap();
}

/// Twelve tasks over three lockers, a third of their acquisitions writes: no writer ever
/// overlaps a reader or another writer, readers do overlap, and nothing hangs.
async fn mixed_load(engine: &Engine, lockers: &[leasehold::Locker; 3]) {
    let readers = Arc::new(AtomicI64::new(0));
    let writing = Arc::new(AtomicBool::new(false));
    let most_readers = Arc::new(AtomicI64::new(0));
    let writes = Arc::new(AtomicUsize::new(0));
    let unanswered = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (l, locker) in lockers.iter().enumerate() {
        for t in 0..4 {
            let (locker, readers, writing, most_readers, writes, unanswered) = (
                locker.clone(),
                readers.clone(),
                writing.clone(),
                most_readers.clone(),
                writes.clone(),
                unanswered.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let until = Instant::now() + Duration::from_secs(2);
                let mut n = l * 4 + t;
                while Instant::now() < until {
                    n += 1;
                    if n % 3 == 0 {
                        let acquired = locker.write_lock("rw:load").wait(LONG).acquire().await;
                        let Some(w) = unless_unanswered("a writer", acquired, &unanswered) else {
                            sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        assert!(!writing.swap(true, Ordering::SeqCst), "two writers at once");
                        assert_eq!(readers.load(Ordering::SeqCst), 0, "a writer among readers");
                        sleep(Duration::from_millis(2)).await;
                        assert_eq!(readers.load(Ordering::SeqCst), 0, "a reader came in");
                        writing.store(false, Ordering::SeqCst);
                        writes.fetch_add(1, Ordering::Relaxed);
                        unless_unanswered("a writer's release", w.release().await, &unanswered);
                    } else {
                        let acquired = locker.read_lock("rw:load").wait(LONG).acquire().await;
                        let Some(r) = unless_unanswered("a reader", acquired, &unanswered) else {
                            sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        assert!(!writing.load(Ordering::SeqCst), "a reader among writers");
                        let now = readers.fetch_add(1, Ordering::SeqCst) + 1;
                        most_readers.fetch_max(now, Ordering::SeqCst);
                        sleep(Duration::from_millis(5)).await;
                        readers.fetch_sub(1, Ordering::SeqCst);
                        unless_unanswered("a reader's release", r.release().await, &unanswered);
                    }
                }
            }));
        }
    }
    let all = async {
        for task in tasks {
            task.await.expect("a task of the mixed load failed");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .unwrap_or_else(|_| panic!("the mixed load hung on {}", engine.kind()));
    eprintln!(
        "{}: mixed load: {} writes, {} calls unanswered in time",
        engine.kind(),
        writes.load(Ordering::Relaxed),
        unanswered.load(Ordering::Relaxed)
    );
    assert!(writes.load(Ordering::Relaxed) > 0, "no write got in");
    assert!(
        most_readers.load(Ordering::SeqCst) >= 2,
        "readers never overlapped: the run proves little"
    );
}

/// Downgrading (Curator's `testDowngrading` and `testContendingDowngrading`, Redisson's
/// `testWriteReadReentrancy`): the holder of the write lock takes the read lock inside it and
/// releases the write; it keeps reading with no gap, while writers of another locker (one
/// waiting since before, one arriving after) stay blocked, and get in once the read is
/// released.
pub async fn downgrade_keeps_reading(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    let key = "rw:downgrade";
    let w = a
        .write_lock(key)
        .lease(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move { b.write_lock(key).wait(CONTENDER_WAIT * 2).acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = w
        .scope(async {
            a.read_lock(key)
                .lease(Duration::from_secs(2))
                .acquire()
                .await
        })
        .await
        .expect("a read inside the held write is granted at once");
    assert!(r.fence() >= w.fence());
    w.release().await.expect("the write guard is released");
    // Longer than the lease: the read is renewed, and nobody gets in meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        r.is_held(),
        "the downgraded read holds on after the write's release"
    );
    assert!(
        !waiting.is_finished(),
        "the waiting writer got in during the downgraded read"
    );
    let late = b.write_lock(key).try_acquire().await.unwrap();
    assert!(late.is_none(), "a writer got in during the downgraded read");
    assert!(!r.is_reentrant(), "a downgrade is a hold of its own");
    r.release().await.expect("the read is released");
    let started = Instant::now();
    let got = waiting
        .await
        .unwrap()
        .expect("the waiting writer gets in after the read");
    assert!(started.elapsed() < HANDOVER, "{:?}", started.elapsed());
    got.release().await.unwrap();
}
