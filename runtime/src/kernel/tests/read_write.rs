//! Read-write locks on the in-memory store, on Tokio's paused clock: readers share, writers
//! exclude everyone, a waiting writer holds new readers back, crashed readers free their
//! share after their lease, re-entry rules, and the readers' fences.

use std::time::Duration;

use crate::{LockError, Locker};

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn readers_share_and_a_writer_waits_them_out() {
    let locker = Locker::in_memory();
    let a = locker.read_lock("doc").acquire().await.unwrap();
    let b = locker.read_lock("doc").acquire().await.unwrap();
    assert!(a.is_held() && b.is_held());
    assert!(locker
        .write_lock("doc")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(locker.lock("doc").try_acquire().await.unwrap().is_none());
    let writer = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.write_lock("doc").wait(LONG).acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    a.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!writer.is_finished(), "one reader is still in");
    b.release().await.unwrap();
    let w = writer.await.unwrap().unwrap();
    assert!(w.is_held());
    assert!(locker
        .read_lock("doc")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
}

#[tokio::test(start_paused = true)]
async fn a_waiting_writer_holds_new_readers_back() {
    let locker = Locker::in_memory();
    let first = locker.read_lock("doc").acquire().await.unwrap();
    let writer = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.write_lock("doc").wait(LONG).acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        locker
            .read_lock("doc")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a new reader must not pass a waiting writer"
    );
    let late_reader = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.read_lock("doc").wait(LONG).acquire().await })
    };
    first.release().await.unwrap();
    let w = writer.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(
        !late_reader.is_finished(),
        "the reader waits for the writer"
    );
    let fence = w.fence();
    w.release().await.unwrap();
    let r = late_reader.await.unwrap().unwrap();
    assert!(
        r.fence() >= fence,
        "a reader's fence is at least the last writer's"
    );
}

#[tokio::test(start_paused = true)]
async fn a_crashed_reader_frees_its_share_after_its_lease() {
    let locker = Locker::in_memory();
    let lease = Duration::from_millis(200);
    let crashed = locker
        .read_lock("doc")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    // A crash: the guard is never released, nothing renews it.
    std::mem::forget(crashed);
    let start = tokio::time::Instant::now();
    let w = locker.write_lock("doc").wait(LONG).acquire().await.unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= lease - Duration::from_millis(20) && waited <= lease + Duration::from_secs(1),
        "{waited:?}"
    );
    drop(w);
}

#[tokio::test(start_paused = true)]
async fn the_watchdog_renews_every_reader() {
    let locker = Locker::in_memory();
    let lease = Duration::from_millis(300);
    let a = locker
        .read_lock("doc")
        .lease(lease)
        .acquire()
        .await
        .unwrap();
    let b = locker
        .read_lock("doc")
        .lease(lease)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(lease * 5).await;
    assert!(a.is_held() && b.is_held());
    assert!(locker
        .write_lock("doc")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    a.release().await.unwrap();
    b.release().await.unwrap();
    assert!(locker
        .write_lock("doc")
        .try_acquire()
        .await
        .unwrap()
        .is_some());
}

#[tokio::test(start_paused = true)]
async fn re_entry_reads_inside_writes_and_refuses_writes_inside_reads() {
    let locker = Locker::in_memory();
    let w = locker.write_lock("doc").acquire().await.unwrap();
    w.scope(async {
        // A read inside the write is a downgrade: a guard of its own on the write's lease.
        let r = locker.read_lock("doc").acquire().await.unwrap();
        assert!(!r.is_reentrant());
        assert_eq!(r.fence(), w.fence());
        // A write inside the write is a plain re-entry.
        let again = locker.write_lock("doc").acquire().await.unwrap();
        assert!(again.is_reentrant());
    })
    .await;
    drop(w);

    let r = locker.read_lock("doc").acquire().await.unwrap();
    r.scope(async {
        let again = locker.read_lock("doc").acquire().await.unwrap();
        assert!(again.is_reentrant());
        let started = tokio::time::Instant::now();
        let e = locker
            .write_lock("doc")
            .wait(LONG)
            .acquire()
            .await
            .unwrap_err();
        assert!(matches!(e, LockError::Config { .. }), "{e:?}");
        assert!(e.to_string().contains("inside a read lock"), "{e}");
        assert!(
            started.elapsed() < Duration::from_millis(1),
            "refused at once"
        );
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn writers_get_new_fences_and_readers_fences_between_writers() {
    let locker = Locker::in_memory();
    let r0 = locker.read_lock("doc").acquire().await.unwrap();
    let f0 = r0.fence();
    assert!(f0 >= 1, "no writer yet");
    drop(r0);
    tokio::task::yield_now().await;
    let w1 = locker.write_lock("doc").wait(LONG).acquire().await.unwrap();
    let f1 = w1.fence();
    assert!(f1 > f0, "a writer's fence is above the reader's before it");
    drop(w1);
    let r1 = locker.read_lock("doc").wait(LONG).acquire().await.unwrap();
    assert!(r1.fence() >= f1, "at least the last writer's fence");
    let f1 = r1.fence();
    drop(r1);
    let w2 = locker.write_lock("doc").wait(LONG).acquire().await.unwrap();
    assert!(w2.fence() > f1, "above the reader's before it");
}

/// Issue 27, bug 4, in memory: a writer cancelled while it waited for readers kept new
/// readers out until the end of the wait it had asked for (60 s here), not only while it
/// waited. Now it withdraws when its acquire is dropped.
#[tokio::test(start_paused = true)]
async fn a_cancelled_writer_lets_new_readers_in_at_once() {
    let locker = Locker::in_memory();
    let inside = locker.read_lock("doc").acquire().await.unwrap();
    let writer = tokio::time::timeout(
        Duration::from_millis(300),
        locker.write_lock("doc").wait(LONG).acquire(),
    )
    .await;
    assert!(writer.is_err(), "the writer got the lock past a reader");
    let started = tokio::time::Instant::now();
    let reader = locker.read_lock("doc").wait(LONG).acquire().await;
    assert!(reader.is_ok(), "{reader:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1),
        "a new reader waited {:?} behind a writer that had left",
        started.elapsed()
    );
    assert!(inside.is_held());
}

/// A downgrade (Curator's `testDowngrading`, Redisson's `testWriteReadReentrancy`): the
/// holder of the write lock takes the read lock inside it, releases the write, and keeps
/// reading with no gap while a waiting writer stays blocked; the read's release lets it in.
#[tokio::test(start_paused = true)]
async fn a_downgraded_read_keeps_the_lock_until_it_is_released() {
    // One process: its other tasks wait in its local queue, which a release would hand the
    // lease to (the conformance suite checks writers of other processes on every engine).
    let locker = Locker::in_memory();
    let other = locker.clone();
    let w = locker.write_lock("doc").acquire().await.unwrap();
    let r = w
        .scope(async { locker.read_lock("doc").acquire().await.unwrap() })
        .await;
    let writer = {
        let other = other.clone();
        tokio::spawn(async move { other.write_lock("doc").wait(LONG).acquire().await })
    };
    let waiter = {
        let locker = locker.clone();
        tokio::spawn(async move { locker.write_lock("doc").wait(LONG).acquire().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    w.release().await.expect("the write guard is released");
    assert!(r.is_held(), "the downgraded read holds on");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(r.is_held(), "renewed with the lease");
    assert!(!writer.is_finished(), "a waiting writer got in");
    assert!(!waiter.is_finished(), "a waiting writer got in");
    r.release()
        .await
        .expect("the read is released, and the lock with it");
    let (a, b) = (writer.await.unwrap(), waiter.await.unwrap());
    assert!(
        a.is_ok() || b.is_ok(),
        "a waiting writer gets in: {a:?} {b:?}"
    );
}

/// Whatever the order of the two guards' ends (release or drop), the lock ends with the
/// last of them, never before.
#[tokio::test(start_paused = true)]
async fn a_downgrade_ends_with_the_last_of_its_guards() {
    let locker = Locker::in_memory();
    let free = |locker: Locker| async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        locker
            .write_lock("doc")
            .try_acquire()
            .await
            .unwrap()
            .is_some()
    };
    // Read done first, then the write: the write's end frees the lock.
    let w = locker.write_lock("doc").acquire().await.unwrap();
    let r = w
        .scope(async { locker.read_lock("doc").acquire().await.unwrap() })
        .await;
    drop(r);
    assert!(w.is_held());
    assert!(!free(locker.clone()).await, "taken while the write holds");
    drop(w);
    assert!(free(locker.clone()).await, "freed by the write's end");
    // Write dropped first, then the read dropped.
    let w = locker.write_lock("doc").acquire().await.unwrap();
    let r = w
        .scope(async { locker.read_lock("doc").acquire().await.unwrap() })
        .await;
    drop(w);
    assert!(r.is_held());
    assert!(!free(locker.clone()).await, "taken while the read holds");
    drop(r);
    assert!(free(locker.clone()).await, "freed by the read's end");
}

/// Issue 46, item 2: a write guard with `hold_at_least`, downgraded, lost its hold. The write
/// guard's release left the lease to the downgraded read without its hold, and the read (no
/// hold of its own) then ended the lease at once: with a 5 s hold the lock was free 0.3 s
/// after the read's release. The last guard of a downgrade now keeps every guard's hold,
/// whichever order they end in and whether they are released or dropped, where locks expire
/// and where they live with the session.
#[tokio::test(start_paused = true)]
async fn a_downgrade_keeps_the_writes_hold_at_least() {
    const HOLD: Duration = Duration::from_secs(5);
    const TICK: Duration = Duration::from_millis(5);
    for (session_locks, drop_them) in [(false, false), (false, true), (true, false), (true, true)] {
        let store = crate::store::scripted::ScriptedStore::new();
        if session_locks {
            store.keep_locks_for_the_session();
        }
        let (a, b) = (
            Locker::scripted(store.clone()),
            Locker::scripted(store.clone()),
        );
        let start = tokio::time::Instant::now();
        let w = a
            .write_lock("doc")
            .hold_at_least(HOLD)
            .acquire()
            .await
            .unwrap();
        let r = w
            .scope(async { a.read_lock("doc").acquire().await.unwrap() })
            .await;
        if drop_them {
            drop(w);
        } else {
            w.release().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        if drop_them {
            drop(r);
        } else {
            r.release().await.unwrap();
        }
        let case = format!("session locks {session_locks}, dropped {drop_them}");
        tokio::time::sleep(TICK).await;
        assert!(
            b.write_lock("doc").try_acquire().await.unwrap().is_none(),
            "{case}: the lock was free {:?} after it was taken, right after the downgraded \
             read's release, within the write's hold of {HOLD:?}",
            start.elapsed()
        );
        tokio::time::sleep_until(start + HOLD - TICK).await;
        assert!(
            b.write_lock("doc").try_acquire().await.unwrap().is_none(),
            "{case}: the lock was free {:?} after it was taken, within the write's hold of \
             {HOLD:?}",
            start.elapsed()
        );
        tokio::time::sleep_until(start + HOLD + TICK).await;
        let next = b.write_lock("doc").try_acquire().await.unwrap();
        assert!(next.is_some(), "{case}: still taken after the hold");
    }
}

/// The read of a downgrade keeps a hold of its own too (it may be the guard that ends the
/// lease), and a write released last keeps the read's hold.
#[tokio::test(start_paused = true)]
async fn a_downgraded_read_keeps_its_own_hold_at_least() {
    const HOLD: Duration = Duration::from_secs(5);
    const TICK: Duration = Duration::from_millis(5);
    for write_last in [false, true] {
        let store = crate::store::scripted::ScriptedStore::new();
        let (a, b) = (
            Locker::scripted(store.clone()),
            Locker::scripted(store.clone()),
        );
        let w = a.write_lock("doc").acquire().await.unwrap();
        let start = tokio::time::Instant::now();
        let r = w
            .scope(async { a.read_lock("doc").hold_at_least(HOLD).acquire().await })
            .await
            .unwrap();
        if write_last {
            r.release().await.unwrap();
            w.release().await.unwrap();
        } else {
            w.release().await.unwrap();
            r.release().await.unwrap();
        }
        tokio::time::sleep_until(start + HOLD - TICK).await;
        assert!(
            b.write_lock("doc").try_acquire().await.unwrap().is_none(),
            "write released last: {write_last}; free within the read's hold"
        );
        tokio::time::sleep_until(start + HOLD + TICK).await;
        assert!(b.write_lock("doc").try_acquire().await.unwrap().is_some());
    }
}

/// Issue 46, item 2: re-entry read the lease's kind, which stays exclusive through a
/// downgrade, so a downgraded read's scope re-entered a write (the port of Redisson's
/// `testWriteReadReentrancy` saw a write `tryLock` granted after the downgrade), and so did
/// the write's own scope once its guard was released while the read held on. A write inside
/// a held read is refused (the promise of docs/guide/read-write.md), and a read there still
/// re-enters.
#[tokio::test(start_paused = true)]
async fn a_downgraded_reads_scope_refuses_a_write() {
    let locker = Locker::in_memory();
    let refused = |e: LockError| {
        assert!(matches!(e, LockError::Config { .. }), "{e:?}");
        assert!(e.to_string().contains("inside a read lock"), "{e}");
    };
    // The read's own scope, before and after the write's release.
    let w = locker.write_lock("doc").acquire().await.unwrap();
    let r = w
        .scope(async { locker.read_lock("doc").acquire().await.unwrap() })
        .await;
    let before = r
        .scope(async { locker.write_lock("doc").try_acquire().await })
        .await;
    refused(before.unwrap_err());
    // Inside the write's scope too, the write is held: a write there re-enters.
    let nested = w
        .scope(async {
            r.scope(async { locker.write_lock("doc").try_acquire().await })
                .await
        })
        .await;
    assert!(nested.unwrap().unwrap().is_reentrant());
    w.release().await.unwrap();
    let (write, read) = r
        .scope(async {
            (
                locker.write_lock("doc").try_acquire().await,
                locker.read_lock("doc").try_acquire().await,
            )
        })
        .await;
    refused(write.unwrap_err());
    let again = read.unwrap().expect("a read inside the read re-enters");
    assert!(again.is_reentrant());
    drop(again);
    assert!(r.is_held());
    drop(r);

    // The write's scope, whose guard is released (from outside it) while the downgraded
    // read taken in it holds on: a write there is refused; before the release it re-enters.
    let w = locker.write_lock("doc").acquire().await.unwrap();
    let (released_tx, released_rx) = tokio::sync::oneshot::channel::<()>();
    let (read_tx, read_rx) = tokio::sync::oneshot::channel::<()>();
    let body = w.scope(async {
        let r = locker.read_lock("doc").acquire().await.unwrap();
        let inside = locker.write_lock("doc").try_acquire().await;
        assert!(inside.unwrap().unwrap().is_reentrant(), "the write holds");
        read_tx.send(()).unwrap();
        released_rx.await.unwrap();
        let after = locker.write_lock("doc").try_acquire().await;
        (r, after)
    });
    let release = async {
        read_rx.await.unwrap();
        w.release().await.unwrap();
        released_tx.send(()).unwrap();
    };
    let ((r, after), ()) = tokio::join!(body, release);
    refused(after.unwrap_err());
    assert!(r.is_held());
    r.release().await.unwrap();
    assert!(locker
        .write_lock("doc")
        .try_acquire()
        .await
        .unwrap()
        .is_some());
}
