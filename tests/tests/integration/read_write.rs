//! Read-write locks on a real `redis-server`: a waiting writer keeps new readers out (also
//! after the key expired) and lets them in at once when it leaves, and readers' fences never go
//! back. Read locks are tested elsewhere too: on ZooKeeper and etcd in `engines::zookeeper` and
//! `engines::etcd`; under faults in the `faults` binary (`primitives::read_write_*`,
//! `scenarios::s11_read_write_*`); on every engine in the conformance suite (`read_write`,
//! `differential`).

use std::time::Duration;

use leasehold::{LockError, Locker};
use leasehold_tests::harness::{eventually, ProxyMode, RedisServer, TcpProxy};
use redis::AsyncCommands;
use tokio::time::Instant;

use crate::lock_core::locker;

/// A writer still in line when the lock key is gone (the last reader's lease ran out and took
/// the writer's `R+` mark with it) keeps new readers out: they look again shortly instead of
/// passing it. Set up by hand on the server: a live entry in the interest set, no lock key.
#[tokio::test]
async fn a_reader_does_not_pass_a_waiting_writer_after_the_key_expired() {
    let srv = RedisServer::start().await;
    let reader = locker(&srv.url()).await;
    let mut conn = srv.conn().await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _: () = conn
        .zadd("leasehold:interest:{doc}", "writer-process", now_ms + 5_000)
        .await
        .unwrap();
    assert!(
        reader
            .read_lock("doc")
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a reader passed a waiting writer"
    );
    let _: () = conn.del("leasehold:interest:{doc}").await.unwrap();
    assert!(
        reader
            .read_lock("doc")
            .try_acquire()
            .await
            .unwrap()
            .is_some(),
        "nobody waits any more"
    );
}

/// The fence of a read lock of `key`, given back at once.
async fn read_fence(locker: &Locker, key: &str) -> u64 {
    let guard = locker.read_lock(key).acquire().await.expect("read lock");
    let fence = guard.fence();
    guard.release().await.expect("release the read lock");
    fence
}

/// The fence of a write lock of `key`, given back at once.
async fn write_fence(locker: &Locker, key: &str) -> u64 {
    let guard = locker.write_lock(key).acquire().await.expect("write lock");
    let fence = guard.fence();
    guard.release().await.expect("release the write lock");
    fence
}

/// Issue 27, bug 2: a reader's fence was the fence counter as it was, without the clock
/// floor of the writers' reservations. A server restarted from an RDB snapshot brings back an
/// old counter: the reader got a fence below the writers' after the snapshot. Now a reader's
/// fence is at least the server clock (µs) too: at or above every fence handed out before,
/// below every later writer's.
#[tokio::test]
async fn a_reader_fence_never_goes_back_after_a_restart_from_a_snapshot() {
    let srv = RedisServer::start().await;
    let before = locker(&srv.url()).await;
    let mut last = 0;
    for _ in 0..3 {
        last = write_fence(&before, "doc").await;
    }
    let mut conn = srv.conn().await;
    let _: () = redis::cmd("SAVE").query_async(&mut conn).await.unwrap();
    for _ in 0..6 {
        let fence = write_fence(&before, "doc").await;
        assert!(fence > last, "{fence} after {last}");
        last = fence;
    }
    drop(before);
    srv.restart_from_disk().await;
    let mut conn = srv.conn().await;
    let counter: u64 = conn.get("leasehold:fence:{doc}").await.unwrap();
    assert!(counter < last, "the snapshot holds the old counter");

    let after = locker(&srv.url()).await;
    let read = read_fence(&after, "doc").await;
    assert!(
        read >= last,
        "a reader after the restart got fence {read}; writers had {last} before it"
    );
    let next = write_fence(&after, "doc").await;
    assert!(
        next > read,
        "a writer after the reader got fence {next}, not above the reader's {read}"
    );
}

/// Issue 27, bug 2: after the fence counter expired (`fence_ttl` of disuse: a quiet spell on a
/// read-mostly key), a reader got fence 1, below every writer's before it.
#[tokio::test]
async fn a_reader_fence_never_goes_back_after_the_fence_counter_expired() {
    let srv = RedisServer::start().await;
    let locker = Locker::builder()
        .url(srv.url())
        .op_timeout(Duration::from_millis(500))
        .fence_ttl(Duration::from_secs(1))
        .build()
        .await
        .expect("connect");
    let written = write_fence(&locker, "quiet").await;
    let mut conn = srv.conn().await;
    eventually("the fence counter expires", Duration::from_secs(5), || {
        let mut conn = conn.clone();
        async move {
            let exists: bool = conn.exists("leasehold:fence:{quiet}").await.unwrap();
            !exists
        }
    })
    .await;
    let read = read_fence(&locker, "quiet").await;
    assert!(
        read >= written,
        "a reader after the counter expired got fence {read}; a writer had {written} before"
    );
    let next = write_fence(&locker, "quiet").await;
    assert!(next > read, "writer's {next} not above the reader's {read}");
    let _: () = conn.del("leasehold:fence:{quiet}").await.unwrap();
}

/// How a waiting writer leaves without the lock, in the tests of issue 27, bug 4.
#[derive(Clone, Copy, Debug)]
enum WriterLeaves {
    /// Its wait runs out: `Busy`.
    Busy,
    /// Its acquire future is dropped mid-wait (a timeout around it).
    Cancelled,
    /// Its task is aborted and its locker (another process, as far as Redis can tell) dropped.
    LockerDropped,
    /// Its locker loses Redis (a cut proxy) and is dropped: a process killed while it waited.
    /// Nothing reaches Redis; its interest has to lapse by itself.
    Killed,
}

/// Issue 27, bug 4: a reader holds (renewed by the watchdog); a writer of another locker
/// waits for it and leaves without the lock as `how` says; then a new reader that waits 5 s
/// must get in, within `bound`. The `R+` mark the writer left kept every new reader out for
/// as long as the readers inside renewed.
async fn a_writer_that_left_lets_new_readers_in(how: WriterLeaves, bound: Duration) {
    let srv = RedisServer::start().await;
    let proxy = TcpProxy::start(srv.addr()).await;
    let readers = locker(&srv.url()).await;
    let inside = readers
        .read_lock("rw")
        .lease(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap();
    let writers = locker(&proxy.url()).await;
    match how {
        WriterLeaves::Busy => {
            let outcome = writers
                .write_lock("rw")
                .wait(Duration::from_millis(300))
                .acquire()
                .await;
            assert!(
                matches!(outcome, Err(LockError::Busy { .. })),
                "{outcome:?}"
            );
        }
        WriterLeaves::Cancelled => {
            let outcome = tokio::time::timeout(
                Duration::from_millis(300),
                writers
                    .write_lock("rw")
                    .wait(Duration::from_secs(10))
                    .acquire(),
            )
            .await;
            assert!(outcome.is_err(), "the writer got the lock: {outcome:?}");
        }
        WriterLeaves::LockerDropped | WriterLeaves::Killed => {
            let writer = tokio::spawn(async move {
                let outcome = writers
                    .write_lock("rw")
                    .wait(Duration::from_secs(10))
                    .acquire()
                    .await;
                (writers, outcome)
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            if let WriterLeaves::Killed = how {
                proxy.set_mode(ProxyMode::Cut);
            }
            writer.abort();
            assert!(writer.await.unwrap_err().is_cancelled());
        }
    }
    // The readers inside renew past the writer's wait: the lock stays read-held.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(inside.is_held());
    let started = Instant::now();
    let outcome = readers
        .read_lock("rw")
        .wait(Duration::from_secs(5))
        .acquire()
        .await;
    let took = started.elapsed();
    eprintln!("{how:?}: a new reader got in after {took:?}");
    assert!(
        outcome.is_ok(),
        "a new reader was refused after {took:?} with no writer waiting ({how:?}): {outcome:?}"
    );
    assert!(
        took < bound,
        "a new reader waited {took:?} behind a writer that had left ({how:?}); bound {bound:?}"
    );
    assert!(inside.is_held());
}

#[tokio::test]
async fn a_writer_that_gave_up_lets_new_readers_in_at_once() {
    a_writer_that_left_lets_new_readers_in(WriterLeaves::Busy, Duration::from_millis(700)).await;
}

#[tokio::test]
async fn a_writer_that_was_cancelled_lets_new_readers_in_at_once() {
    a_writer_that_left_lets_new_readers_in(WriterLeaves::Cancelled, Duration::from_millis(700))
        .await;
}

#[tokio::test]
async fn a_writer_whose_locker_was_dropped_lets_new_readers_in_at_once() {
    a_writer_that_left_lets_new_readers_in(WriterLeaves::LockerDropped, Duration::from_millis(700))
        .await;
}

/// A writer that can tell Redis nothing (its process was killed) holds new readers back only
/// until its interest lapses: at most MAX_INTEREST (2 s) after its last attempt.
#[tokio::test]
async fn a_killed_writer_keeps_new_readers_out_at_most_its_interest() {
    a_writer_that_left_lets_new_readers_in(WriterLeaves::Killed, Duration::from_millis(2_900))
        .await;
}
